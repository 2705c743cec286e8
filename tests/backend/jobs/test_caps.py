"""Caps at submit: configurations per job and queued jobs per user, through the real CLI and the
audited submit the pages use (pages/access.guarded wraps backend.auth.audit.audited)."""

from __future__ import annotations

import getpass
from pathlib import Path

import pytest

from backend.auth.audit import Action, audited
from backend.auth.roles import Principal, Role, Via
from backend.errors import UserError
from backend.queue import jobs
from backend.specs import SweepSpec
from tests.backend.test_cli import optiboard


def test_a_sweep_over_the_configuration_cap_is_refused_and_queues_nothing(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_MAX_CONFIGS_PER_JOB", "3")
    assert optiboard("add", str(mlp_path)).returncode == 0
    refused = optiboard("submit", "1", "--precisions", "fp32,fp16", "--batch-sizes", "1,8")
    assert refused.returncode == 2
    assert refused.stderr == (
        "error: This sweep holds 4 configurations, more than the 3 one job may hold "
        "(OPTIBOARD_MAX_CONFIGS_PER_JOB); choose fewer precisions, providers or batches.\n"
    )
    assert "no jobs yet" in optiboard("jobs").stdout
    assert optiboard("submit", "1", "--precisions", "fp32,fp16").returncode == 0  # 2 fit


def test_queued_jobs_are_capped_per_user_whichever_door_they_came_through(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_MAX_QUEUED_JOBS_PER_USER", "2")
    assert optiboard("add", str(mlp_path)).returncode == 0
    for _ in range(2):
        assert optiboard("submit", "1", "--precisions", "fp32").returncode == 0
    who = f"cli:{getpass.getuser()}"
    third = optiboard("submit", "1", "--precisions", "fp32")
    assert third.returncode == 2
    assert third.stderr == (
        f"error: {who} already has 2 jobs waiting for a worker, the most one user may queue "
        "(OPTIBOARD_MAX_QUEUED_JOBS_PER_USER); wait for some to start, or cancel some.\n"
    )
    assert [j.submitted_by for j in jobs.list_jobs()] == [who, who]

    # another user, submitting as the Optimize page does (inside the audited action), has room
    editor = Principal("ed", Role.EDITOR, Via.PASSWORD)
    for _ in range(2):
        with audited(editor, Action.SUBMIT, "model 1"):
            jobs.submit_sweep(1, SweepSpec())
    with pytest.raises(UserError, match="^ed already has 2 jobs waiting"):
        with audited(editor, Action.SUBMIT, "model 1"):
            jobs.submit_sweep(1, SweepSpec())

    assert optiboard("cancel", "1").returncode == 0  # a cancelled job no longer counts
    with pytest.raises(UserError, match="^ed already has 2 jobs waiting"):  # nor does a retry
        with audited(editor, Action.RETRY, "job 1"):
            jobs.retry_job(1)
    assert optiboard("submit", "1", "--precisions", "fp32").returncode == 0
