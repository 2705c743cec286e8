"""A real dashboard (`streamlit run serve.py`) for the tests that drive one over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.waiting import free_port

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"  # screenshots and server logs, for a person to look at


@contextmanager
def seeding(data_dir: Path) -> Iterator[None]:
    """This process reads and writes `data_dir` (its SQLite file, never OPTIBOARD_DATABASE_URL)
    inside the block: a module's dashboard seeded before its server starts on the same folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPTIBOARD_DATA_DIR", str(data_dir))
        patch.delenv("OPTIBOARD_DATABASE_URL", raising=False)
        yield


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until Streamlit's health route answers 200; fails when the process exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError("streamlit did not become healthy")


@contextmanager
def serve_py(
    data_dir: Path,
    log: Path,
    env: Mapping[str, str] | None = None,
    append: bool = False,
    keep_as: str = "",
) -> Iterator[tuple[str, subprocess.Popen]]:
    """serve.py on a free loopback port with data_dir as its data folder and access control on
    (the test's own database and auth settings are not passed on), output in log; its URL and
    process. Terminated (killed past 30 s) when the block ends; then the log is copied to
    test-artifacts/{keep_as} when that names a file."""
    port = free_port()
    server_env = {**os.environ, "OPTIBOARD_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    for variable in ("OPTIBOARD_DATABASE_URL", "OPTIBOARD_AUTH"):
        server_env.pop(variable, None)
    server_env |= dict(env or {})
    with open(log, "ab" if append else "wb") as out:
        proc = subprocess.Popen(
            streamlit_argv("serve.py", port),
            cwd=ROOT,
            env=server_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if keep_as:
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / keep_as).write_bytes(log.read_bytes())


def streamlit_argv(script: str, port: int, *extra: str) -> list[str]:
    """`streamlit run script` headless on `port`, not watching files."""
    return [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port)] + [
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        *extra,
    ]


def stop_and_keep_logs(procs: list[subprocess.Popen], logs: Path, prefix: str) -> None:
    """Terminate every process (killed past 20 s each), then copy each log in `logs` to
    test-artifacts/{prefix}{name}."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    ARTIFACTS.mkdir(exist_ok=True)
    for log in logs.iterdir():
        (ARTIFACTS / f"{prefix}{log.name}").write_bytes(log.read_bytes())


@contextmanager
def app_and_worker(data_dir: Path, logs: Path, prefix: str, **env: str) -> Iterator[str]:
    """`streamlit run app.py` and a worker sharing `data_dir`, access control off (these tests
    are about the workflow; test_signin covers sign-in), `env` on top; the app's URL. Their logs
    go to `logs` (created), copied to test-artifacts/{prefix}streamlit.log and worker.log."""
    server_env = {**os.environ, "OPTIBOARD_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    server_env |= {"OPTIBOARD_AUTH": "off", **env}
    server_env.pop("OPTIBOARD_DATABASE_URL", None)
    port = free_port()
    logs.mkdir()
    server = subprocess.Popen(
        streamlit_argv("app.py", port),
        cwd=ROOT,
        env=server_env,
        stdout=open(logs / "streamlit.log", "wb"),  # noqa: SIM115 - closed with the process
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "backend.queue.worker", "--poll-seconds", "0.5"],
        cwd=ROOT,
        env=server_env,
        stdout=open(logs / "worker.log", "wb"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield url
    finally:
        stop_and_keep_logs([worker, server], logs, prefix)
