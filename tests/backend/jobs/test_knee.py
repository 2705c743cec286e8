"""The knee rule (perf_analyzer's: < 5% gain for 3 steps) on series recorded on an H200."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from backend.jobs.knee import BatchPoint, best_batch, knee_sentence, knee_stop, series_key
from backend.specs import Configuration, IoMode, SweepSpec

RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results"


def recorded_series(name: str) -> list[BatchPoint]:
    """FP16 device-resident, default CUDA options: the series the bench's knee search ran, its
    numbers only (every point taken as stable: the rule's arithmetic; the stored rows' own
    verdicts are the integration tests' below)."""
    rows = json.loads((RESULTS / f"h200_gpu_depth_{name}.json").read_text())
    configs = [(Configuration.from_dict(r["configuration"]), r) for r in rows]
    wanted = series_key(next(c for c, _ in configs if "device" in c.key and c.batch_size == 2))
    points = [
        BatchPoint(c.batch_size, r["throughput"], p50_ms=r["latency"]["p50"]) for c, r in configs
    ]
    keys = [series_key(c) for c, _ in configs]
    return sorted(
        (p for p, k in zip(points, keys, strict=True) if k == wanted), key=lambda p: p.batch
    )


def test_resnet50_stops_once_three_doublings_add_under_five_percent() -> None:
    series = recorded_series("resnet50")
    assert [p.batch for p in series] == [2**i for i in range(11)]
    stops = [bool(knee_stop(series[: n + 1])) for n in range(len(series))]
    first = stops.index(True)
    assert all(stops[first:]) and not any(stops[:first])
    gains = [b.throughput / a.throughput - 1 for a, b in zip(series, series[1:], strict=False)]
    assert all(g < 0.05 for g in gains[first - 3 : first]) and gains[first - 4] >= 0.05
    reason = knee_stop(series)
    knee = series[first - 3].batch  # where the flat run began, not the highest throughput
    assert f"knee is at batch {knee}" in reason and knee == 128 and best_batch(series) == 512


def test_a_flat_step_through_an_unstable_measurement_is_not_the_knee() -> None:
    series = recorded_series("resnet50")  # stops at batch 1024, the knee at 128 (above)
    stops = [bool(knee_stop(series[: n + 1])) for n in range(len(series))]
    first = stops.index(True)
    # the same numbers, one of the flat run's batches measured unstable (a stall, as on a busy
    # CPU): its steps say nothing, so the search goes on past it
    shaky = series[first - 1].batch
    marked = [replace(p, stable=p.batch != shaky) for p in series]
    assert knee_stop(marked[: first + 1]) == ""
    said = knee_sentence(marked[: first + 1])
    assert said.startswith(f"no knee up to batch {series[first].batch}")
    assert f"batch {shaky} measured unstable, so no flat step through it counted" in said


def test_bert_keeps_growing_past_five_percent_so_the_search_goes_on() -> None:
    series = recorded_series("bert_base")
    assert knee_stop(series) == ""


def test_out_of_memory_or_a_failure_ends_the_series() -> None:
    grown = [BatchPoint(1, 100.0), BatchPoint(2, 190.0)]
    assert "out of GPU memory" in knee_stop([*grown, BatchPoint(4, None, out_of_memory=True)])
    assert "batch 4 failed" in knee_stop([*grown, BatchPoint(4, None)])
    assert best_batch([*grown, BatchPoint(4, None)]) == 2


def _h200_knee_sweep() -> SweepSpec:
    """The knee search the stored H200 ResNet-50 series ran: FP16 on CUDA, device I/O."""
    return SweepSpec(
        precisions=("fp16",),
        providers=("cuda",),
        io_modes=(IoMode.DEVICE,),
        find_knee=True,
        knee_max_batch=2048,
    )


def test_the_worker_skips_batches_past_the_knee_of_stored_results(
    data_dir: Path, mlp_path: Path
) -> None:
    """Stored as a worker stores them: the H200 series up to 512, then up to 1024."""
    from backend.jobs.knee import skip_reason
    from backend.models.ingest import ingest_file
    from backend.queue import jobs
    from backend.specs import CudaOptions
    from storage.repo import results as result_store

    model = ingest_file(mlp_path, mlp_path.name)
    spec = _h200_knee_sweep()
    job = jobs.submit_sweep(model.id, spec)
    by_batch = {c.batch_size: c for c in spec.configurations()}
    rows = json.loads((RESULTS / "h200_gpu_depth_resnet50.json").read_text())
    wanted = {c.key for c in by_batch.values()}
    series = sorted(
        (
            r
            for r in rows
            if r["config_key"] in wanted
            and CudaOptions.from_value(r["configuration"]["cuda"]) == CudaOptions()
        ),
        key=lambda r: r["configuration"]["batch_size"],
    )
    for row in series[:-1]:  # batches 1 ... 512
        result_store.save_result(job.id, row, [])
    assert skip_reason(spec, by_batch[1024], jobs.stored_results(job.id)) == ""
    result_store.save_result(job.id, series[-1], [])  # batch 1024: the third flat step
    # the H200 measured batch 1024 unstable: that flat step is no evidence, so 2048 still runs
    assert series[-1]["stable"] is False
    assert skip_reason(spec, by_batch[2048], jobs.stored_results(job.id)) == ""


def test_the_knee_sentence_cites_the_knee_and_the_step_that_did_not_pay() -> None:
    series = recorded_series("resnet50")
    at = {p.batch: p for p in series}
    gained = at[256].throughput / at[128].throughput - 1
    cost = at[256].p50_ms / at[128].p50_ms
    assert knee_sentence(series) == (
        f"knee at batch 128: {at[128].throughput:.0f} samples/s, p50 {at[128].p50_ms:.3g} ms; "
        f"batch 256 gained only {gained:.1%} throughput for {cost:.1f}x the latency "
        f"(the most, {at[512].throughput:.0f} samples/s, at batch 512)"
    )


def test_no_knee_up_to_the_largest_batch_says_how_much_throughput_still_grew() -> None:
    series = recorded_series("bert_base")
    grew = series[-1].throughput / series[-2].throughput - 1
    assert knee_sentence(series).startswith(
        f"no knee up to batch 1024: throughput still grew {grew:.1%} from batch 512 to 1024 "
        f"({series[-1].throughput:.0f} samples/s, p50"
    )


def test_wrong_outputs_end_the_series_and_are_never_the_knee() -> None:
    grown = [BatchPoint(1, 100.0, p50_ms=1.0), BatchPoint(2, 190.0, p50_ms=1.05)]
    wrong = BatchPoint(4, None, wrong_outputs=True)
    assert knee_stop([*grown, wrong]) == "batch 4 computed wrong outputs"
    assert knee_sentence([*grown, wrong]) == (
        "no knee up to batch 2: throughput still grew 90.0% from batch 1 to 2 "
        "(190 samples/s, p50 1.05 ms); the search ended because batch 4 computed wrong outputs"
    )


def test_the_sweep_plan_stops_at_the_knee_from_the_results_it_is_sent_alone(
    data_dir: Path, mlp_path: Path
) -> None:
    """The plan is sent each batch's result (the H200 series as recorded) and stores none of
    them: it stops at the knee from what it holds, so it never reads the job to decide."""
    from backend.jobs.context import JobContext
    from backend.jobs.sweep import sweep_plan
    from backend.models.ingest import ingest_file
    from backend.queue import jobs
    from backend.results import ConfigurationResult, StoredResult
    from storage.artifacts import ArtifactStore
    from storage.repo import results as result_store
    from storage.states import utcnow

    model = ingest_file(mlp_path, mlp_path.name)
    spec = _h200_knee_sweep()
    job = jobs.submit_sweep(model.id, spec)
    recorded = {r["config_key"]: r for r in json.loads(_resnet50_rows())}
    context = JobContext(job, ArtifactStore())
    plan = sweep_plan(spec, [], context)
    sent = []
    step = next(plan)
    while step.config.key in recorded:
        result = ConfigurationResult.from_dict(recorded[step.config.key])
        sent.append(step.config.batch_size)
        step = plan.send(StoredResult(len(sent), job.id, utcnow(), step.config, result))
    assert sent == [2**i for i in range(11)]  # 1 ... 1024
    assert result_store.list_results(job_ids=[job.id]) == []
    # the H200 measured batch 1024 unstable, so the flat run's last step is no evidence: the
    # plan asks for 2048 instead of calling the knee at 128 from it
    b1024 = next(c for c in spec.configurations() if c.batch_size == 1024)
    assert recorded[b1024.key]["stable"] is False
    assert step.config.batch_size == 2048
    assert not [e for e in jobs.job_events(job.id) if "not run" in e.message]


def _resnet50_rows() -> str:
    return (RESULTS / "h200_gpu_depth_resnet50.json").read_text()
