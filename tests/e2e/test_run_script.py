"""The README's run command: scripts/run starts the worker (in its restart loop) and dashboard."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from tests.waiting import free_port as _free_port

ROOT = Path(__file__).resolve().parents[2]


def test_scripts_run_serves_the_dashboard_and_starts_a_worker(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPTIBOARD_")}
    env |= {"OPTIBOARD_DATA_DIR": str(tmp_path / "data"), "OPTIBOARD_PORT": str(port)}
    log = tmp_path / "run.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(ROOT / "scripts" / "run")],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        health, ready = "", False
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not (health == "ok" and ready):
            assert proc.poll() is None, log.read_text()[-2000:]
            time.sleep(1)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health") as r:
                    health = r.read().decode()
            except OSError:
                continue
            worker_log = tmp_path / "data" / "worker.log"
            ready = worker_log.exists() and " ready" in worker_log.read_text()
        assert health == "ok", log.read_text()[-2000:]
        assert ready, "the worker never said it was ready"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
