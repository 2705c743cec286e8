"""The worker as users run it: a real process over a real SQLite file and real ONNX Runtime."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from backend.engine.explain import FASTER, SLOWER
from backend.engine.measure import PEAK_SCOPE
from backend.launch.folders import FOLDER_PREFIX, children_root
from backend.models import library
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.results import ResultStatus
from backend.specs import MeasureSettings, Precision, SweepSpec
from storage.repo import jobs as job_store
from storage.repo import results as result_store
from storage.states import JobState
from tests import models as model_factory
from tests.waiting import wait_for
from tests.workers import start_worker

ROOT = Path(__file__).resolve().parents[3]
QUICK = MeasureSettings(
    warmup_runs=2, window_runs=10, window_min_seconds=0.05, max_seconds=3, accuracy_samples=1
)


def test_worker_runs_a_sweep_and_stores_every_configuration(data_dir: Path, mlp_path: Path) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    spec = SweepSpec(
        precisions=("fp32", "int8_static"),
        providers=("cpu", "cuda"),
        batch_sizes=(1, 4),
        measure=QUICK,
    )
    job = jobs.submit_sweep(model.id, spec)
    worker = start_worker("--once")
    output, _ = worker.communicate(timeout=300)
    assert worker.returncode == 0, output

    done = jobs.get_job(job.id)
    assert done.state == JobState.SUCCEEDED and done.progress_done == done.progress_total == 8
    results = {r.config_key: r for r in jobs.stored_results(job.id)}
    cpu = [r for r in results.values() if r.configuration.provider == "cpu"]
    assert len(cpu) == 4 and all(r.status == ResultStatus.OK and r.latency.p50 > 0 for r in cpu)
    assert all(r.result.providers_used == ["CPUExecutionProvider"] for r in cpu)
    for r in cpu:
        samples = result_store.result_samples([r.id])[r.id]
        assert len(samples) == r.latency.count >= 30
        assert r.latency.p50 == pytest.approx(float(np.percentile(samples, 50)))
        assert r.result.accuracy.cosine_similarity > 0.98
        assert r.result.environment["packages"]["onnxruntime"]
        assert r.result.peak_rss_mb > 0 and r.result.peak_rss_scope == PEAK_SCOPE
    cuda = [r for r in results.values() if r.configuration.provider == "cuda"]
    assert len(cuda) == 4
    if any(s.available for s in library_providers() if s.name == "cuda"):
        assert all(r.status == ResultStatus.OK for r in cuda)
        assert all("CUDAExecutionProvider" in r.result.providers_used for r in cuda)
    else:
        # never a silent CPU fallback: the GPU rows say why they did not run
        assert all(
            r.status == ResultStatus.UNAVAILABLE and "CUDAExecutionProvider" in r.error
            for r in cuda
        )
    optimized = [a for a in library.list_artifacts(model.id) if a.kind == "optimized"]
    built = [a for a in optimized if ".ort-" not in a.filename]
    ort_graphs = [a for a in optimized if ".ort-all" in a.filename]
    assert len(built) == 4 and len(ort_graphs) == 2  # ORT's own graph for each FP32 config
    for artifact in optimized:
        onnx.checker.check_model(str(library.artifact_path(artifact.sha256)))
    workers = jobs.list_workers(alive_within_seconds=None)  # every one registered
    assert workers and workers[0].providers["onnxruntime"][0]["name"] == "cpu"
    # the queue done, it exited and said so: not counted alive for the heartbeat's 30 s
    assert workers[0].stopped_at is not None and jobs.list_workers() == []


def library_providers():
    from backend.runtimes import get_runtime

    return get_runtime("onnxruntime").providers()


def test_killed_worker_job_is_resumed_by_another_without_duplicates(
    data_dir: Path, cnn_path: Path
) -> None:
    model = ingest_file(cnn_path, "cnn.onnx")
    slow = MeasureSettings(
        warmup_runs=2,
        window_runs=10,
        window_min_seconds=0.5,
        stability_tolerance=0.5,
        max_seconds=3,
        accuracy_samples=1,
    )
    spec = SweepSpec(precisions=("fp32",), batch_sizes=(1, 2, 3, 4), measure=slow)
    job = jobs.submit_sweep(model.id, spec)
    first = start_worker("--lease-seconds", "3")
    try:
        wait_for(lambda: len(jobs.stored_results(job.id)) >= 1, what="first result")
        made = children_root().glob(f"{FOLDER_PREFIX}{first.pid}-job{job.id}-*")
        left = [folder for folder in made if folder.is_dir()]
        assert len(left) == 1  # the job's output folder, which the kill leaves behind
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    stored_before = len(jobs.stored_results(job.id))
    assert jobs.get_job(job.id).state == JobState.RUNNING  # the dead worker still holds it
    time.sleep(3.5)  # let the lease run out
    second = start_worker("--once", "--lease-seconds", "30")
    output, _ = second.communicate(timeout=300)
    assert second.returncode == 0, output

    final = jobs.get_job(job.id)
    assert final.state == JobState.SUCCEEDED and final.attempts == 2
    keys = [r.config_key for r in jobs.stored_results(job.id)]
    assert len(keys) == len(set(keys)) == 4
    events = [e.message for e in jobs.job_events(job.id)]
    assert any(f"resuming: {stored_before}" in m for m in events), events
    assert not left[0].exists()  # swept by the next worker's first launch, its lock file too
    assert not left[0].with_name(left[0].name + ".owner").exists()


def test_cancelling_a_running_job_stops_it_and_the_worker_goes_on(
    data_dir: Path, cnn_path: Path
) -> None:
    model = ingest_file(cnn_path, "cnn.onnx")
    long_run = MeasureSettings(window_runs=10, stability_tolerance=0.001, max_seconds=60)
    job = jobs.submit_sweep(model.id, SweepSpec(batch_sizes=(1, 2), measure=long_run))
    worker = start_worker()
    try:
        wait_for(lambda: jobs.get_job(job.id).state == JobState.RUNNING, what="job to start")
        time.sleep(1.0)
        assert jobs.cancel_job(job.id) == JobState.RUNNING  # a request, honoured by the worker
        wait_for(
            lambda: jobs.get_job(job.id).state == JobState.CANCELLED,
            timeout=30,
            what="cancellation",
        )
        assert worker.poll() is None
        next_job = jobs.submit_sweep(model.id, SweepSpec(measure=QUICK))
        wait_for(lambda: jobs.get_job(next_job.id).state == JobState.SUCCEEDED, what="next job")
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    assert jobs.stored_results(job.id) == []  # the cancelled configuration stored nothing


def test_configuration_over_its_time_limit_fails_and_the_job_records_why(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    job = jobs.submit_sweep(model.id, SweepSpec(measure=MeasureSettings(max_seconds=0.5)))
    worker = start_worker("--once", env={"OPTIBOARD_CONFIG_TIMEOUT_S": "0"})
    output, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0, output
    final = jobs.get_job(job.id)
    assert final.state == JobState.FAILED
    (result,) = jobs.stored_results(job.id)
    assert result.status == ResultStatus.FAILED and "time limit of 0 s exceeded" in result.error
    assert final.error.startswith("the only configuration failed: ")  # one: singular


def test_model_no_backend_can_run_fails_with_the_runtime_error(
    data_dir: Path, tmp_path: Path
) -> None:
    from onnx import TensorProto, helper

    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.acme")
    graph = helper.make_graph(
        [node],
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    onnx_model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.acme", 1)]
    )
    path = model_factory.save(onnx_model, tmp_path / "custom.onnx")
    model = ingest_file(path, "custom.onnx")
    job = jobs.submit_sweep(model.id, SweepSpec(measure=QUICK))
    worker = start_worker("--once")
    output, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0, output
    (result,) = jobs.stored_results(job.id)
    assert result.status == ResultStatus.FAILED and "Frobnicate" in result.error
    assert jobs.get_job(job.id).state == JobState.FAILED


@pytest.mark.parametrize("precision", ["fp16", "int8_dynamic"])
def test_slow_precisions_carry_a_plain_reason(
    data_dir: Path, cnn_path: Path, precision: str
) -> None:
    from backend.queue.worker import JobRunner

    model = ingest_file(cnn_path, "cnn.onnx")
    job = jobs.submit_sweep(model.id, SweepSpec(precisions=("fp32", precision), measure=QUICK))
    claimed = job_store.claim_job("inline", 300, job_id=job.id)
    assert JobRunner("inline").run(claimed).state == JobState.SUCCEEDED
    stored = {r.configuration.precision: r for r in jobs.stored_results(job.id)}
    slow, fp32 = stored[Precision(precision)], stored[Precision.FP32]
    speedup = slow.result.telemetry["speedup_vs_fp32"]
    # the speedup is measured against the FP32 row of the same provider and batch
    assert speedup == pytest.approx(fp32.latency.p50 / slow.latency.p50)
    text = " ".join(slow.result.notes)
    fp16 = precision == "fp16"
    reason = "CPU provider has few float16 kernels" if fp16 else "Dynamic INT8 ran at"
    if "Speed not explained" in text:  # a busy host: either run unstable, or its figures split
        assert reason not in text and f"{speedup:.2f}x" in text
        assert not (slow.result.stable and fp32.result.stable) or "the throughput says" in text
    else:  # the reason appears exactly when the measured speedup calls for it
        assert (reason in text) == (speedup < (FASTER if fp16 else SLOWER))
    assert "speedup_vs_fp32" not in fp32.result.telemetry
