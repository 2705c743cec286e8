"""Baselines: pin, unpin and list, each audited; refusals (unknown or missing environment, an
unpinned or unfinished job) store nothing; a configuration with too few samples to judge is
neither drift nor the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend import baselines, runtimeenvs
from backend.auth.audit import Action, audited, recent
from backend.auth.cli import cli_principal
from backend.errors import UserError
from backend.queue import jobs
from backend.reporting import regression as stats
from backend.specs import Precision, SweepSpec
from pages.components.baselines import drift_rows
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


BASE = [1.0 + (i % 10) / 1000 for i in range(400)]  # a baseline's 400 calls near 1 ms


def _drift(a_ms: list[float], b_ms: list[float]) -> baselines.Drift:
    interval = stats.bootstrap_ratio(a_ms, b_ms)
    return baselines.Drift(1, 2, "k", "CPU FP32 b1", interval, stats.verdict(interval), "d", "d")


def test_too_few_samples_are_no_drift_and_say_why_on_every_view() -> None:
    """Three calls of the re-run against 400 of the baseline, 20% slower: no verdict."""
    few = _drift(BASE, [1.2, 1.21, 1.22])
    assert few.verdict == stats.TOO_FEW and not few.flagged
    assert few.line() == (
        "CPU FP32 b1: re-run 2 (d) / baseline 1 (d): too few samples to judge: 400 from the "
        "baseline and 3 from the re-run, and a 95% interval of a median needs at least 6 on "
        "each side; measure longer (a larger time cap, --max-seconds)"
    )
    enough = _drift(BASE, [1.2 + i / 1000 for i in range(6)])
    assert enough.verdict == stats.SLOWER and enough.flagged
    [row_few, row_enough] = drift_rows([few, enough])
    assert (row_few["verdict"], row_few["interval"]) == ("⏳ too few samples", "")
    assert row_enough["verdict"] == "🔻 slower" and row_enough["interval"].endswith(" at 95%")
