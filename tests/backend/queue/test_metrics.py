"""The worker's Prometheus metrics, scraped from a real worker process over loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import settings
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.specs import MeasureSettings, SweepSpec
from storage.states import JobState
from tests.prometheus import metric_samples
from tests.waiting import free_port

ROOT = Path(__file__).resolve().parents[3]
QUICK = MeasureSettings(
    warmup_runs=2, window_runs=10, window_min_seconds=0.05, max_seconds=3, accuracy_samples=1
)


def test_metrics_are_off_unless_a_port_is_set_and_then_on_loopback() -> None:
    assert settings.WORKER_METRICS_PORT.default == "0"
    assert settings.WORKER_METRICS_ADDRESS.default == "127.0.0.1"


def test_worker_counts_jobs_configurations_durations_and_queue_depth(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    spec = SweepSpec(precisions=("fp32",), providers=("cpu",), batch_sizes=(1, 2), measure=QUICK)
    job = jobs.submit_sweep(model.id, spec)
    port = free_port()
    worker = subprocess.Popen(
        [sys.executable, "-m", "backend.queue.worker", "--poll-seconds", "0.2"],
        cwd=ROOT,
        env={**os.environ, "OPTIBOARD_WORKER_METRICS_PORT": str(port)},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 180
        while jobs.get_job(job.id).state != JobState.SUCCEEDED and time.monotonic() < deadline:
            time.sleep(0.3)
        time.sleep(0.5)  # one more poll updates the gauges
        samples = metric_samples(port)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
    sweep = (("kind", "sweep"),)
    assert samples[("optiboard_jobs_finished_total", (*sweep, ("state", "succeeded")))] == 1
    assert samples[("optiboard_configurations_total", (*sweep, ("outcome", "ok")))] == 2
    assert samples[("optiboard_configuration_seconds_count", sweep)] == 2
    assert samples[("optiboard_configuration_seconds_sum", sweep)] > 0
    assert samples[("optiboard_job_seconds_count", sweep)] == 1
    assert samples[("optiboard_jobs", (("state", "succeeded"),))] == 1
    assert samples[("optiboard_queue_depth", ())] == 0
