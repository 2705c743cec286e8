"""The real worker (`python -m backend.queue.worker`) as a process of its own, for the tests that
need one outside pytest's process (a crash, a lease, a clock of its own, a clean import state)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_worker(
    *args: str, env: Mapping[str, str] | None = None, wrapper: Sequence[str] = ()
) -> subprocess.Popen:
    """A worker polling every 0.2 s in a session of its own, output piped (text); `wrapper`
    goes before the interpreter (a faketime command), `env` on top of this environment."""
    return subprocess.Popen(
        [*wrapper, sys.executable, "-m", "backend.queue.worker", "--poll-seconds", "0.2", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def run_worker_once(timeout: float) -> str:
    """The worker run until the queue is empty (--once); fails unless it exits 0. Its output."""
    worker = subprocess.run(
        [sys.executable, "-m", "backend.queue.worker", "--once", "--poll-seconds", "0.2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert worker.returncode == 0, worker.stdout + worker.stderr
    return worker.stdout + worker.stderr
