"""Baselines: pin, unpin and list, each audited; refusals (unknown or missing environment, an
unpinned or unfinished job) store nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend import baselines, runtimeenvs
from backend.auth.audit import Action, audited, recent
from backend.auth.cli import cli_principal
from backend.errors import UserError
from backend.queue import jobs
from backend.specs import Precision, SweepSpec
from tests.pages.seed import add_job, add_model, finished_sweep


def _state() -> tuple[list[int], list[int]]:
    return [j.id for j in jobs.list_jobs()], [b.job_id for b in baselines.list_baselines()]


def test_pin_unpin_and_list_are_audited(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1,))
    with audited(cli_principal(), Action.BASELINE_PIN, f"job {job.id}"):
        row = baselines.pin(job.id)
    assert row.pinned_by.startswith("cli:") and baselines.is_pinned(job.id)
    assert [b.job_id for b in baselines.list_baselines()] == [job.id]
    with pytest.raises(UserError, match="already pinned"):
        with audited(cli_principal(), Action.BASELINE_PIN, f"job {job.id}"):
            baselines.pin(job.id)
    with audited(cli_principal(), Action.BASELINE_UNPIN, f"job {job.id}"):
        baselines.unpin(job.id)
    assert baselines.list_baselines() == []
    rows = [(e.action, e.target, e.outcome) for e in recent(limit=3)]
    assert rows == [
        ("baseline_unpin", f"job {job.id}", "ok"),
        ("baseline_pin", f"job {job.id}", "failed"),
        ("baseline_pin", f"job {job.id}", "ok"),
    ]


def test_refusals_store_nothing(
    data_dir: Path, mlp_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = add_model(mlp_path)
    queued = add_job(model.id, SweepSpec(precisions=(Precision.FP32,)))
    before = _state()
    with pytest.raises(UserError, match="is not pinned as a baseline; pin it first"):
        baselines.rerun(queued.id)
    with pytest.raises(UserError, match="is queued; pin a job that succeeded"):
        baselines.pin(queued.id)
    with pytest.raises(UserError, match="There is no runtime environment 'ort-0.1'"):
        jobs.submit_sweep(model.id, SweepSpec(precisions=(Precision.FP32,), runtime_env="ort-0.1"))
    pins = tmp_path / "ort-9.txt"
    pins.write_text("onnxruntime==9.9.9\n")
    absent = runtimeenvs.RuntimeEnv("ort-9", pins, tmp_path / "ort-9")
    monkeypatch.setitem(runtimeenvs.ENVIRONMENTS, "ort-9", absent)
    with pytest.raises(UserError, match="'ort-9' is not set up; run scripts/setup-runtime-env"):
        jobs.submit_sweep(model.id, SweepSpec(precisions=(Precision.FP32,), runtime_env="ort-9"))
    with pytest.raises(UserError, match="no job 999"):
        baselines.pin(999)
    assert _state() == before
