"""First-use migrations from several processes at once on one fresh database (the worker and the
dashboard start together on a new data folder), on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Event
from pathlib import Path

from sqlalchemy import create_engine, inspect, text

from storage.db import make_engine, upgrade
from tests.spawning import plain_main

PROCESSES = 4


def _migrate(url: str, start: Event) -> None:
    start.wait(30)
    upgrade(make_engine(url))


def _race(url: str) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    with plain_main():
        children = [context.Process(target=_migrate, args=(url, start)) for _ in range(PROCESSES)]
        for child in children:
            child.start()
    start.set()
    for child in children:
        child.join(120)
    assert [child.exitcode for child in children] == [0] * PROCESSES
    engine = create_engine(url)
    assert "compat_cache" in inspect(engine).get_table_names()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar_one() == 1
    engine.dispose()


def test_processes_migrating_one_fresh_sqlite_file_at_once_all_succeed(tmp_path: Path) -> None:
    for attempt in range(3):
        _race(f"sqlite:///{tmp_path / f'fresh{attempt}.db'}")


def test_processes_migrating_one_fresh_postgresql_database_at_once_all_succeed(
    postgres_url: str,
) -> None:
    _race(postgres_url)
