"""The same storage code on a real PostgreSQL server, started for the test session."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.states import JobState


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries are not installed (scripts/test installs them)")
    # outside pytest's tmp tree, whose 0700 parent the unprivileged server user cannot enter
    root = Path(tempfile.mkdtemp(prefix="optiboard-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        os.chown(root, 65534, 65534)
        as_user = ["runuser", "-u", "nobody", "--"]
    data, port = root / "db", _free_port()
    subprocess.run(
        [*as_user, initdb, "-D", str(data), "-A", "trust", "-U", "optiboard"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1"
    subprocess.run(
        [*as_user, pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://optiboard@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True
        )
        shutil.rmtree(root, ignore_errors=True)


def test_schema_queue_and_results_work_on_postgresql(
    postgres_url: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_DATABASE_URL", postgres_url)
    model = model_store.create_model(
        name="pg",
        sha256="b" * 64,
        format="onnx",
        size_bytes=1,
        metadata={"opset": 17},
        artifacts=[model_store.NewArtifact("original", "b" * 64, 1, "m.onnx")],
    )
    job = job_store.create_job(model.id, {"precisions": ["fp32"]}, total=2)
    claimed = job_store.claim_job("w1", 30)
    assert claimed.id == job.id and claimed.state == JobState.RUNNING
    assert job_store.claim_job("w2", 30) is None
    payload = {"config_key": "k", "configuration": {}, "status": "ok", "latency": {"p50": 1.0}}
    result_store.save_result(job.id, payload, [1.0, 1.1])
    result_store.save_result(job.id, payload, [0.9])
    (row,) = result_store.list_results(job_ids=[job.id])
    assert result_store.result_samples([row.id]) == {row.id: [0.9]}
    assert job_store.finish_job(job.id, JobState.SUCCEEDED, worker_id="w1")
    model_store.delete_model(model.id)
    assert job_store.list_jobs() == []
