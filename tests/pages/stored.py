"""Stored result fixtures: what a seeding step (an ingest, a queued job, a real worker run) left in
the data directory, made once per test run and copied into every later test that takes that step.

A step is keyed by the state it starts from (the database's rows as SQLite dumps them, and every
other file of the data directory) and by what it is asked (its name, its arguments, the OPTIBOARD_*
environment). The first test to take a step runs it for real, through the real ingest or the real
worker loop, and the store keeps the data directory it left (the SQLite file copied with SQLite's
backup, the artifacts as files). A later test whose data directory is in that same state gets
that copy instead, so ids, rows, events and artifacts are exactly what the real runner wrote.
Steps chain: a copy leaves the state the next step is keyed on. A test that did anything else to
its data directory first (signed in, uploaded a file, ran the CLI) starts from another state and
runs the step for real. PostgreSQL (OPTIBOARD_DATABASE_URL) is never stored.

Under pytest-xdist the workers share one store and take a lock per step, so each step still runs
once per test run. Without a store (outside pytest) every step runs for real.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TypeVar

from settings import data_dir

T = TypeVar("T")

DB_NAME = "optiboard.db"  # settings.database_url's file under the data directory
DB_FILES = {DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", f"{DB_NAME}-journal"}


class Store:
    """One folder of stored steps, shared by every process of one test run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.ran = 0  # steps this process ran for real
        self.copied = 0  # steps this process took from the store

    def step(
        self,
        name: str,
        args: object,
        run: Callable[[], T],
        save: Callable[[T], object],
        load: Callable[[object], T],
    ) -> T:
        """The result of run() in the data directory, from the store when it has it.

        save turns the result into JSON (ids), load turns that back into the result, read from
        the copied database, as the test would have got it from run().
        """
        directory = _sqlite_data_dir()
        if directory is None:
            return run()
        key = _key(directory, name, args)
        entry = self.root / key
        with _locked(self.root / f"{key}.lock"):
            if (entry / "step.json").is_file():
                _restore(entry, directory)
                self.copied += 1
                return load(json.loads((entry / "step.json").read_text())["result"])
            started = time.monotonic()
            result = run()
            took = round(time.monotonic() - started, 2)
            test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
            _keep(
                directory,
                entry,
                {"step": name, "args": repr(args), "result": save(result), "test": test, "s": took},
            )
            self.ran += 1
            return result

    def write_counts(self, who: str) -> None:
        (self.root / f"counts-{who}.json").write_text(
            json.dumps({"ran": self.ran, "copied": self.copied})
        )

    def slowest(self, count: int) -> list[tuple[float, str, str]]:
        """The real steps that took longest: (seconds, step, the test that ran it)."""
        found = []
        for path in self.root.glob("*/step.json"):
            step = json.loads(path.read_text())
            found.append((step.get("s", 0.0), step["step"], step.get("test", "")))
        return sorted(found, reverse=True)[:count]

    def counts(self) -> tuple[int, int]:
        """Steps run for real and steps copied, summed over the run's processes."""
        ran = copied = 0
        for path in self.root.glob("counts-*.json"):
            counts = json.loads(path.read_text())
            ran, copied = ran + counts["ran"], copied + counts["copied"]
        return ran, copied


_store: Store | None = None


def use(store: Store | None) -> Store | None:
    """Seed through this store from now on (None: run every step for real); returns the one that
    was in use."""
    global _store
    previous, _store = _store, store
    return previous


def step(
    name: str,
    args: object,
    run: Callable[[], T],
    save: Callable[[T], object],
    load: Callable[[object], T],
) -> T:
    """Store.step on the store in use, or run() when there is none."""
    if _store is None:
        return run()
    return _store.step(name, args, run, save, load)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _sqlite_data_dir() -> Path | None:
    """The data directory when the database is its SQLite file; None for PostgreSQL."""
    if os.environ.get("OPTIBOARD_DATABASE_URL"):
        return None
    return data_dir().resolve()


def _files(directory: Path) -> list[Path]:
    """Every path under the directory but the SQLite file and its companions, parents first."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*") if str(p.relative_to(directory)) not in DB_FILES)


def _state(directory: Path) -> str:
    """A digest of what the data directory holds: the database's rows and the other files."""
    digest = hashlib.sha256()
    database = directory / DB_NAME
    if database.is_file():
        with closing(sqlite3.connect(database, timeout=30)) as connection:
            for line in connection.iterdump():
                digest.update(line.encode() + b"\n")
    for path in _files(directory):
        digest.update(str(path.relative_to(directory)).encode() + b"\0")
        if path.is_file():
            digest.update(file_digest(path).encode())
    return digest.hexdigest()


def _key(directory: Path, name: str, args: object) -> str:
    env = sorted(
        (k, v)
        for k, v in os.environ.items()
        if k.startswith("OPTIBOARD_") and k != "OPTIBOARD_DATA_DIR"
    )
    text = json.dumps([_state(directory), name, repr(args), env])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _backup(source: Path, target: Path) -> None:
    """Copy one SQLite database onto another through SQLite, so connections already open on the
    target (this process's engine) read the copied rows, and a WAL is never half-copied."""
    if not target.exists():  # created private, as storage makes it
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o600))
    with closing(sqlite3.connect(source, timeout=30)) as src:
        with closing(sqlite3.connect(target, timeout=30)) as dst:
            src.backup(dst)


def _copy_files(source: Path, target: Path) -> None:
    for path in _files(source):
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(mode=path.stat().st_mode & 0o777, exist_ok=True)
        else:
            shutil.copy2(path, destination)


def _keep(directory: Path, entry: Path, step: dict) -> None:
    """Store the data directory a real step left, whole, then name it (a rename: never half)."""
    incoming = entry.with_name(f"{entry.name}.incoming")
    shutil.rmtree(incoming, ignore_errors=True)
    (incoming / "files").mkdir(parents=True)
    _copy_files(directory, incoming / "files")
    if (directory / DB_NAME).is_file():
        _backup(directory / DB_NAME, incoming / DB_NAME)
    (incoming / "step.json").write_text(json.dumps(step))
    incoming.rename(entry)


def _restore(entry: Path, directory: Path) -> None:
    """Make the data directory what the stored step left: its files, then its database."""
    files = entry / "files"
    for path in reversed(_files(directory)):  # what the step removed (children first)
        if not (files / path.relative_to(directory)).exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    _copy_files(files, directory)
    if (entry / DB_NAME).is_file():
        _backup(entry / DB_NAME, directory / DB_NAME)
