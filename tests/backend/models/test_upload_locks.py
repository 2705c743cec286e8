"""Uploads hold a blob's lock from the copy to the commit of the row that links it.

Real processes on one real SQLite file and one artifact store. A third connection holding
SQLite's write lock stops an upload between its copy and its commit, which is exactly the moment
a remover (a refused result write's cleanup, or a refused upload's) must not act on the blob.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import numpy as np

from backend.errors import UserError
from backend.models import library
from backend.models.ingest import ingest_file
from backend.queue import jobs
from storage.artifacts import ArtifactStore, sha256_file
from storage.repo import models as model_store
from tests import models as model_factory
from tests.flocks import someone_waits_on, wait_until
from tests.spawning import plain_main

SPAWN = multiprocessing.get_context("spawn")


def _when_told(go: Event, results: Any, label: str, action: str, *args: Any) -> None:
    """Child: wait for `go`, run one real step, report its outcome (imports are done first)."""
    steps: dict[str, Callable[..., Any]] = {
        "ingest": lambda path: ingest_file(Path(path), "upload.onnx").id,
        "remove": lambda sha: sorted(model_store.remove_unreferenced(ArtifactStore(), [sha])),
        "calibrate": lambda model_id, path: jobs.store_calibration(model_id, Path(path)),
    }
    go.wait(120)
    try:
        results.put((label, "ok", steps[action](*args)))
    except UserError as exc:
        results.put((label, "refused", str(exc)))


class _Step:
    """One child process that runs a step when told to."""

    def __init__(self, results: Any, label: str, action: str, *args: Any) -> None:
        self.go = SPAWN.Event()
        self.process = SPAWN.Process(
            target=_when_told, args=(self.go, results, label, action, *args)
        )
        with plain_main():  # after an AppTest, __main__ is app.py: the child must not re-run it
            self.process.start()

    def start(self) -> None:
        self.go.set()


@contextmanager
def _database_write_lock(data_dir: Path, sql: str = "", *params: Any) -> Iterator[None]:
    """Hold SQLite's write lock (after running `sql` inside it); committed when the block ends."""
    connection = sqlite3.connect(data_dir / "optiboard.db", isolation_level=None, timeout=30)
    connection.execute("PRAGMA foreign_keys=ON")
    connection.execute("BEGIN IMMEDIATE")
    if sql:
        connection.execute(sql, params)
    try:
        yield
    finally:
        connection.execute("COMMIT")
        connection.close()


def _outcomes(results: Any, steps: list[_Step]) -> dict[str, tuple[str, Any]]:
    got = {}
    for _ in steps:
        action, outcome, value = results.get(timeout=120)
        got[action] = (outcome, value)
    for step in steps:
        step.process.join(timeout=60)
    return got


def test_a_refused_writes_cleanup_never_deletes_a_blob_an_upload_is_linking(
    data_dir: Path, mlp_path: Path
) -> None:
    store = ArtifactStore()
    model_store.list_models()  # the database exists before its write lock is taken
    digest = sha256_file(mlp_path)
    results = SPAWN.Queue()
    upload = _Step(results, "upload", "ingest", str(mlp_path))
    cleanup = _Step(results, "cleanup", "remove", digest)
    lock_file = store.root / ".locks" / digest[:2]

    with _database_write_lock(data_dir):  # the upload stops after its copy, before its commit
        upload.start()
        wait_until(lambda: store.exists(digest), "the upload copying its blob")
        cleanup.start()
        wait_until(
            lambda: someone_waits_on(lock_file) or not results.empty(),
            "the cleanup waiting for the blob's lock",
        )
        assert results.empty(), "the cleanup ran while the upload was still linking the blob"

    got = _outcomes(results, [upload, cleanup])
    assert got["cleanup"] == ("ok", [])
    assert got["upload"][0] == "ok"
    (original,) = [a for a in library.list_artifacts(got["upload"][1]) if a.kind == "original"]
    assert original.sha256 == digest and store.exists(digest)


def test_a_refused_uploads_cleanup_never_deletes_a_blob_another_upload_links(
    data_dir: Path, tmp_path: Path
) -> None:
    store = ArtifactStore()
    first, second = (
        ingest_file(model_factory.save(model_factory.make_mlp(seed=s), tmp_path / f"{s}.onnx"), "m")
        for s in (1, 2)
    )
    npz = tmp_path / "cal.npz"
    np.savez(npz, x=np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32))
    digest = sha256_file(npz)
    results = SPAWN.Queue()
    doomed = _Step(results, "doomed", "calibrate", first.id, str(npz))
    kept = _Step(results, "kept", "calibrate", second.id, str(npz))
    lock_file = store.root / ".locks" / digest[:2]

    # the first model is deleted while its calibration upload waits to link the copied file
    with _database_write_lock(data_dir, "DELETE FROM models WHERE id = ?", first.id):
        doomed.start()
        wait_until(lambda: store.exists(digest), "the first upload copying its blob")
        kept.start()
        wait_until(lambda: someone_waits_on(lock_file), "the second upload waiting for the lock")
        assert results.empty()

    got = _outcomes(results, [doomed, kept])
    assert got["doomed"][0] == "refused" and "was deleted" in got["doomed"][1]
    assert got["kept"] == ("ok", digest)
    assert store.exists(digest)
    assert [a.sha256 for a in library.list_artifacts(second.id) if a.kind == "calibration"] == [
        digest
    ]
