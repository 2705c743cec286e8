"""scripts/worker (what scripts/run starts): a worker that dies is started again."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from storage.repo import workers as worker_store
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]


def _live_pids() -> set[int]:
    return {w.pid for w in worker_store.list_workers(alive_within_seconds=10)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_worker_is_restarted_and_stopping_the_script_stops_it(data_dir: Path) -> None:
    script = subprocess.Popen(
        [str(ROOT / "scripts" / "worker"), "--poll-seconds", "0.2"],
        cwd=ROOT,
        env={**os.environ, "OPTIBOARD_WORKER_RESTART_S": "0.2"},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: len(_live_pids()) == 1, what="the first worker")
        (first,) = _live_pids()
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: bool(_live_pids() - {first}), what="a restarted worker")
        (second,) = _live_pids() - {first}
        assert script.poll() is None
        script.terminate()
        output, _ = script.communicate(timeout=30)
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
            script.wait()
    assert script.returncode == 0
    assert "worker exited with status 137; restarting in 0.2 s" in output, output
    wait_for(lambda: not _alive(second), timeout=10, what="the worker to stop with the script")
