"""The foreground commands (`run`, `regress` without --submit) beside a running worker, as
scripts/run always starts one: the terminal runs its own job, the worker never takes it first."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from storage.repo import jobs as job_store
from tests.backend.test_cli import optiboard
from tests.workers import start_worker

# the worker polls faster than the terminal can register itself (it reads every provider first)
EAGER = ("--poll-seconds", "0.01")


def _claims(job_id: int) -> list[str]:
    return [e.message for e in job_store.list_events(job_id) if e.message.startswith("claimed")]


def test_regress_and_run_in_the_terminal_are_never_taken_by_a_running_worker(
    data_dir: Path, mlp_path: Path
) -> None:
    assert optiboard("add", str(mlp_path)).returncode == 0
    worker = start_worker(*EAGER)
    try:
        check = optiboard(
            "regress", "1", "--env-b", "default", "--no-profile", "--max-seconds", "1",
            "--processes", "1",
        )  # fmt: skip
        sweep = optiboard("run", "1", "--precisions", "fp32", "--batch-sizes", "1", "--quick")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.communicate(timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "taken by a running worker" not in check.stdout + check.stderr
    assert check.stdout.startswith("job 1: default against default")
    assert "model 1 (mlp): " in check.stdout and check.stdout.endswith("job 1 succeeded\n")
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    assert "1/1 onnxruntime/cpu/fp32/" in sweep.stdout and "job 2 succeeded" in sweep.stdout
    for job in (1, 2):  # claimed once, by the terminal: the worker never saw it queued
        held = job_store.get_job(job)
        assert _claims(job) == [f"claimed by {held.worker_id}"] and held.attempts == 1
        assert f"-{worker.pid}-" not in str(held.worker_id)  # not the running worker's id
