"""The cluster's failures reach the Jobs page as one sentence; nothing runs without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.errors import UserError
from backend.models.ingest import ingest_file
from backend.queue import jobs, progress
from backend.specs import MeasureSettings, SweepSpec
from storage.states import JobState
from tests.waiting import free_port
from tests.workers import run_worker_once

ROOT = Path(__file__).resolve().parents[3]


def test_a_cluster_unreachable_past_the_give_up_time_fails_the_job_with_one_sentence(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("OPTIBOARD_RAY_ADDRESS", address)
    monkeypatch.setenv("OPTIBOARD_RAY_GIVE_UP_S", "3")  # the worker waits this long, then fails
    job = jobs.submit_sweep(model.id, SweepSpec(measure=MeasureSettings(max_seconds=2)))
    run_worker_once(timeout=120)

    failed = jobs.get_job(job.id)
    assert failed.state == JobState.FAILED
    assert failed.error.startswith(f"The Ray cluster at {address} did not answer")
    assert "\n" not in failed.error and "Traceback" not in failed.error
    assert progress.progress_of(failed).last_error == failed.error  # what the Jobs page shows
    assert "did not answer for 3 s (Connection refused)" in failed.error
    waited = [e for e in jobs.job_events(job.id) if e.level == "warning"]
    assert [e.message.split(";")[0] for e in waited] == [
        f"Ray cluster at {address} is unreachable (Connection refused)"
    ]


def test_targets_without_a_cluster_are_refused_and_nothing_is_queued(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPTIBOARD_RAY_ADDRESS", raising=False)
    model = ingest_file(mlp_path, "mlp.onnx")
    with pytest.raises(UserError, match="need a Ray cluster"):
        jobs.submit_sweep(model.id, SweepSpec(targets=("t4",)))
    assert jobs.list_jobs() == []
