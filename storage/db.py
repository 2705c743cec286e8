"""Engine and session factory from one setting, OPTIBOARD_DATABASE_URL; migrations on first use."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event, make_url, text
from sqlalchemy.exc import InterfaceError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from settings import data_dir, database_url

__all__ = ["data_dir", "database_url", "get_engine", "make_engine", "session_scope", "upgrade"]

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
log = logging.getLogger("optiboard.storage")

PRIVATE_DIR = 0o700  # the data folder: argon2 hashes, the audit log, link_secret, models
PRIVATE_FILE = 0o600  # the SQLite file; SQLite gives its -wal and -shm the same mode


def _tighten(path: Path, mode: int) -> None:
    """chmod a path that other local users can read or enter, saying so once in the log."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current & 0o077:
        path.chmod(mode)
        log.warning(
            "tightened %s from %04o to %04o (readable by other local users)", path, current, mode
        )


def secure_data_files(url: str) -> None:
    """Make the data folder 0700 and the SQLite file (and its WAL and SHM) 0600: before the first
    connection creates the file, and at each start for ones an older version left 0755/0644."""
    folder = data_dir().resolve()
    if folder.is_dir():
        _tighten(folder, PRIVATE_DIR)
    database = make_url(url).database if url.startswith("sqlite") else None
    if not database or database == ":memory:":
        return
    path = Path(database)
    if not path.exists() and path.parent.resolve() == folder:
        folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    if not path.exists() and path.parent.is_dir():  # a missing folder elsewhere: SQLite's error
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, PRIVATE_FILE))  # empty: a new database
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if file.exists():
            _tighten(file, PRIVATE_FILE)


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    # Switching the journal mode takes a lock and can answer "database is locked" at once, without
    # waiting, while other connections write: switch only a file that is not in WAL mode yet.
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
        cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


# Any constant shared by every Optiboard process; PostgreSQL's advisory locks are keyed by it.
_MIGRATION_LOCK_KEY = 0x0B7B0A4D


def _hold_migration_lock(connection: Connection) -> None:
    """Serialize first-use migrations across processes (worker and dashboard start together).

    SQLite's driver runs DDL outside any transaction unless one is opened explicitly, so two
    processes migrating a fresh file both saw no table and both created it. BEGIN EXCLUSIVE makes
    the second wait (busy_timeout) and then find the schema at head. PostgreSQL's DDL is
    transactional already; the advisory lock keeps the second from racing the first's CREATEs.
    """
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN EXCLUSIVE")
    elif connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})


# The newest migration's revision: a database already there is recognised with one SELECT,
# without importing Alembic (0.1 s of every CLI, worker and child start that touches the
# database). tests/storage/test_migrations.py fails when a new migration does not update it.
HEAD_REVISION = "0015_point_samples"


def _at_head(connection: Connection) -> bool:
    """The schema is at HEAD_REVISION (a fresh database, without alembic_version, is not)."""
    try:
        rows = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    except (OperationalError, ProgrammingError):  # no table yet: a fresh database
        connection.rollback()
        return False
    return [row[0] for row in rows] == [HEAD_REVISION]


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision, one process at a time."""
    with engine.connect() as connection:
        if _at_head(connection):  # the usual case takes no lock: readers never wait
            return
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        _hold_migration_lock(connection)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")  # finds nothing to do if another process just did it


@lru_cache(maxsize=8)
def _engine_for(url: str) -> Engine:
    secure_data_files(url)
    engine = make_engine(url)
    upgrade(engine)
    return engine


def get_engine(url: str | None = None) -> Engine:
    """One migrated engine per URL per process."""
    return _engine_for(url or database_url())


@lru_cache(maxsize=8)
def _factory_for(url: str) -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(url), expire_on_commit=False)


class DatabaseUnavailable(RuntimeError):
    """The database did not answer (server down, connection lost, locked too long); retry later."""


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    """A transaction: commits on success, rolls back everything on any error.

    Connection-level failures surface as DatabaseUnavailable, so callers above storage can back
    off and retry without knowing SQLAlchemy.
    """
    try:
        session = _factory_for(url or database_url())()
    except (OperationalError, InterfaceError) as exc:
        raise DatabaseUnavailable(f"the database did not answer: {exc}") from exc
    try:
        yield session
        session.commit()
    except (OperationalError, InterfaceError) as exc:
        _rollback_quietly(session)
        raise DatabaseUnavailable(f"the database did not answer: {exc}") from exc
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def _rollback_quietly(session: Session) -> None:
    """Roll back over a connection that may be gone; the original error is the one to report."""
    try:
        session.rollback()
    except (OperationalError, InterfaceError):
        pass
