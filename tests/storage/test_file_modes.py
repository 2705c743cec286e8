"""The data folder and SQLite file hold argon2 hashes and the audit log: private to the owner."""

from __future__ import annotations

import logging
import sqlite3
import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from storage.db import database_url, session_scope


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_database_and_its_wal_and_shm_are_private(data_dir: Path) -> None:
    data_dir.chmod(0o755)  # as a plain mkdir under umask 022 leaves it
    with session_scope() as session:  # migrates, writes through the WAL
        session.execute(text("SELECT count(*) FROM jobs"))
    db = data_dir / "optiboard.db"
    assert database_url().endswith(str(db.resolve()))
    assert _mode(data_dir) == 0o700
    files = [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
    assert all(f.exists() for f in files)
    assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}


def test_an_existing_world_readable_database_is_tightened_at_start_and_logged(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = data_dir / "optiboard.db"
    sqlite3.connect(db).execute("CREATE TABLE older (x)").connection.commit()
    db.chmod(0o644)
    data_dir.chmod(0o755)
    with caplog.at_level(logging.WARNING, logger="optiboard.storage"):
        with session_scope() as session:
            session.execute(text("SELECT count(*) FROM jobs"))
    assert _mode(db) == 0o600 and _mode(data_dir) == 0o700
    lines = [r.getMessage() for r in caplog.records if r.name == "optiboard.storage"]
    assert f"tightened {db.resolve()} from 0644 to 0600 (readable by other local users)" in lines
    assert any(line.startswith(f"tightened {data_dir.resolve()} from 0755") for line in lines)
