"""Serving studies run by the real worker: real tritonserver, real SQLite file, a tiny model.

The worker starts Triton for each configuration, health-checks it, measures every load point from
a child, stores each typed point as it lands and stops the server; a server that cannot start
ends the job with Triton's own log line, and a cancel stops the server. The worker's Prometheus
endpoint, scraped over loopback, counts the study by kind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from backend.models.ingest import ingest_file
from backend.queue import jobs, worker
from backend.serving.scenarios import poisson_schedule
from backend.serving.study import (
    ServedVariant,
    ServingStudy,
    study_points,
    submit_study,
)
from backend.serving.types import BatchingPolicy, LatencyCurve, LoadSpec, Scenario
from backend.serving.view import study_view
from storage.repo import serving as serving_store
from storage.states import JobState
from tests import models as model_factory
from tests.prometheus import metric_samples
from tests.waiting import free_port

ROOT = Path(__file__).resolve().parents[3]
POLICY = BatchingPolicy(max_batch_size=8, max_queue_delay_us=2000)
LOADS = (
    LoadSpec(Scenario.CONCURRENCY, duration_s=1.0, concurrency=4, seed=3),
    LoadSpec(Scenario.SERVER, duration_s=1.0, target_rps=80, seed=5),
)


def _study(
    loads: tuple[LoadSpec, ...] = LOADS, sizes: tuple[int, ...] = (1, 4), env: str = "default"
) -> ServingStudy:
    return ServingStudy(
        variants=(ServedVariant(),),
        policies=(POLICY,),
        loads=loads,
        slo_p99_ms=50.0,
        curve_sizes=sizes,
        runtime_env=env,
    )


def _worker(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "backend.queue.worker", "--poll-seconds", "0.2", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _costs(job_id: int) -> list:
    return serving_store.list_points([job_id], kind=serving_store.COSTS)


def test_worker_process_measures_costs_once_resumes_measures_stores_typed_points_and_counts(
    data_dir: Path, mlp_path: Path, tmp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    job = submit_study(model.id, _study())
    first = _worker("--lease-seconds", "3")
    try:  # killed once the variant's cost measurement is stored: the next worker resumes the job
        deadline = time.monotonic() + 120
        while not _costs(job.id) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert _costs(job.id), "the cost measurement was never stored"
    assert jobs.get_job(job.id).state == JobState.RUNNING  # the dead worker still holds it
    time.sleep(3.5)  # let its lease run out
    port = free_port()
    process = _worker(env={"OPTIBOARD_WORKER_METRICS_PORT": str(port)})
    try:
        deadline = time.monotonic() + 180
        while not jobs.get_job(job.id).state.finished and time.monotonic() < deadline:
            time.sleep(0.3)
        time.sleep(0.5)  # one more poll updates the gauges
        samples = metric_samples(port)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)

    done = jobs.get_job(job.id)
    assert done.state == JobState.SUCCEEDED, done.error
    assert done.progress_done == done.progress_total == 2
    points = study_points(job.id)
    assert [p.spec for p in points.points] == list(LOADS)
    concurrency, server = points.points
    for point in points.points:
        assert point.achieved_rps > 0 and not point.predicted and point.errors == 0
        assert point.latency.p50 <= point.latency.p90 <= point.latency.p99
        assert point.queue_ms >= 0 and point.compute_ms > 0 and point.stability_note
        executions = sum(point.batch_histogram.values())
        assert point.server_metrics["nv_inference_exec_count"] == executions
        assert point.server_metrics["nv_inference_count"] == point.latency.count
    assert max(concurrency.batch_histogram) > 1  # four in flight: Triton stacked them
    assert server.spec.seed == 5
    assert server.arrival_schedule_s == poisson_schedule(80, 1.0, 5)
    ran = {p.runtime_label for p in points.points}  # .triton-venv's own onnxruntime
    assert len(ran) == 1 and ran.pop().endswith(" (default)")
    (row,) = _costs(job.id)  # once per variant, kept by the resumed job
    assert row.point_key == "original|calibration" and row.configuration == "original"
    curve = LatencyCurve.from_dict(row.payload)
    assert curve.batch_sizes == (1, 4) and all(ms > 0 for ms in curve.compute_ms)
    assert curve.request_cost_ms > 0 and curve.response_cost_ms > 0  # measured, not defaults
    messages = [e.message for e in jobs.job_events(job.id)]
    measuring = [m for m in messages if m.startswith("measuring original's costs")]
    assert measuring == [
        "measuring original's costs on Triton: batch sizes 1, 4, a 2000 us queue delay"
    ]
    assert any(m.startswith("resuming: ") for m in messages)
    events = " ".join(messages)
    assert "Triton ready on port" in events and "req/s, p99" in events
    view = study_view(job.id)
    (config,) = view.configurations
    assert len(config.predicted) == len(config.measured) == 2
    for measured, predicted in zip(config.measured, config.predicted, strict=True):
        assert predicted.predicted and predicted.spec == measured.spec
        assert predicted.achieved_rps != measured.achieved_rps  # predicted, never fitted
        assert predicted.latency.p99 != measured.latency.p99
    (costs,) = view.costs
    assert costs.caption.startswith("original, measured on Triton: compute ")
    assert view.prediction_note == ""

    serving = (("kind", "serving"),)
    assert samples[("optiboard_jobs_finished_total", (*serving, ("state", "succeeded")))] == 1
    assert samples[("optiboard_configurations_total", (*serving, ("outcome", "ok")))] == 1
    assert samples[("optiboard_configuration_seconds_count", serving)] == 1
    assert samples[("optiboard_job_seconds_count", serving)] == 1
    verdicts = [v for (name, _), v in samples.items() if name == "optiboard_serving_points_total"]
    assert sum(verdicts) == 2
    assert samples[("optiboard_jobs", (("state", "succeeded"),))] == 1
    assert samples[("optiboard_queue_depth", ())] == 0
    _points_keep_their_requests(model.id, job.id, tmp_path)


def _points_keep_their_requests(model_id: int, job_id: int, tmp_path: Path) -> None:
    """The worker stored each load point with its requests' timings in the same transaction;
    `optiboard export --format json` carries them, and the generator's own percentile method
    (LatencyStats.from_samples) on the exported latencies finds the stored p50 and p99 exactly.
    A Server point's scheduled and sent offsets give back its lateness, and the generator's own
    saturation rule on them gives the stored verdict. Deleting the study's model (and so the
    job) deletes the samples. (Checked on the study above rather than a study of its own.)"""
    from backend.cli import main
    from backend.results import LatencyStats
    from backend.serving.loadgen import saturation_reason
    from backend.serving.sender import Record
    from storage.repo import models as model_store

    job = jobs.get_job(job_id)
    out = tmp_path / "study.json"
    assert main(["export", str(job.id), "--format", "json", "-o", str(out)]) == 0
    records = [r for r in json.loads(out.read_text()) if r["kind"] == "point"]  # not the costs
    assert [r["spec"]["scenario"] for r in records] == ["concurrency", "server"]
    for record in records:
        samples, stored = record["samples"], record["latency"]
        assert samples["kept"] == samples["of"] == stored["count"] and record["errors"] == 0
        again = LatencyStats.from_samples(samples["latency_ms"])
        assert (again.p50, again.p99) == (stored["p50"], stored["p99"])
        assert again == LatencyStats(**stored)  # every figure, from the same samples
        assert len(samples["sent_s"]) == samples["kept"]
    concurrency, server = records
    assert concurrency["samples"]["scheduled_s"] is None  # a closed loop has no schedule
    sent, scheduled = server["samples"]["sent_s"], server["samples"]["scheduled_s"]
    assert sorted(scheduled) == server["arrival_schedule_s"]  # every request sent, once
    assert all(s >= t for s, t in zip(sent, scheduled, strict=True))  # none left early
    spec = LoadSpec(Scenario.SERVER, duration_s=1.0, target_rps=80, seed=5)
    rebuilt = [Record(t, s, s, True) for s, t in zip(sent, scheduled, strict=True)]
    assert bool(saturation_reason(spec, rebuilt)) == server["generator_saturated"]

    ids = [r["point_id"] for r in records]
    assert set(serving_store.point_samples(ids)) == set(ids)
    model_store.delete_model(model_id)
    assert serving_store.point_samples(ids) == {}


def test_a_server_that_cannot_start_ends_the_job_with_tritons_log_line(
    data_dir: Path, tmp_path: Path
) -> None:
    broken = model_factory.save(model_factory.make_custom_op_model(), tmp_path / "custom.onnx")
    model = ingest_file(broken, "custom.onnx")
    unmeasured = submit_study(model.id, _study(sizes=()))
    measured = submit_study(model.id, _study())
    labels = {"kind": "serving", "outcome": "failed"}
    registry = worker.prometheus.WORKER.registry
    failed_before = registry.get_sample_value("optiboard_configurations_total", labels) or 0
    worker.serve(once=True, poll_seconds=0.05)
    for job in (unmeasured, measured):  # the configuration's server, the cost measurement's
        done = jobs.get_job(job.id)
        assert done.state == JobState.FAILED
        assert done.error.startswith("Triton could not serve the model")
        assert "failed to load 'model'" in done.error and "MyOp" in done.error
        assert "\n" not in done.error and "Traceback" not in done.error  # one sentence
        assert serving_store.list_points([job.id]) == []
    # a cost measurement is no configuration: only the first job's server counts
    assert registry.get_sample_value("optiboard_configurations_total", labels) == failed_before + 1


def test_cancel_stops_the_server_and_keeps_only_whole_points(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    long = (LoadSpec(Scenario.CONCURRENCY, duration_s=60.0, concurrency=2),)
    job = submit_study(model.id, _study(long, sizes=(), env="ort-1.31"))  # made by scripts/test
    runner = threading.Thread(target=worker.serve, kwargs={"once": True, "poll_seconds": 0.05})
    runner.start()
    pid = None
    deadline = time.monotonic() + 60
    while pid is None and time.monotonic() < deadline:
        found = [re.search(r"pid (\d+)", e.message) for e in jobs.job_events(job.id)]
        pid = next((int(m.group(1)) for m in found if m), None)
        time.sleep(0.1)
    assert pid is not None, "Triton never became ready"
    ready = [e.message for e in jobs.job_events(job.id) if "Triton ready" in e.message]
    assert ready[0].endswith(", onnxruntime 1.31.1 (ort-1.31)")  # the study's environment
    os.kill(pid, 0)  # the server runs
    jobs.cancel_job(job.id)
    runner.join(timeout=60)
    assert not runner.is_alive()
    assert jobs.get_job(job.id).state == JobState.CANCELLED
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped
    assert serving_store.list_points([job.id]) == []


def test_cancel_during_the_cost_measurement_ends_the_job_before_any_configuration(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    long = (LoadSpec(Scenario.CONCURRENCY, duration_s=60.0, concurrency=2),)
    job = submit_study(model.id, _study(long))
    runner = threading.Thread(target=worker.serve, kwargs={"once": True, "poll_seconds": 0.05})
    runner.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        e.message.startswith("measuring") for e in jobs.job_events(job.id)
    ):
        time.sleep(0.05)
    jobs.cancel_job(job.id)  # the cost measurement's servers and loads take seconds more
    runner.join(timeout=60)
    assert not runner.is_alive()
    assert jobs.get_job(job.id).state == JobState.CANCELLED
    assert serving_store.list_points([job.id]) == []  # no cost measurement, no point
    messages = [e.message for e in jobs.job_events(job.id)]
    assert any(m.startswith("measuring original's costs") for m in messages), messages
    assert not any("Triton ready" in m for m in messages)  # no configuration was served
