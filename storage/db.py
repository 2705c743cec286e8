"""Engine and session factory from one setting, OPTIBOARD_DATABASE_URL; migrations on first use."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from settings import data_dir, database_url

__all__ = ["data_dir", "database_url", "get_engine", "make_engine", "session_scope", "upgrade"]

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


@lru_cache(maxsize=8)
def _engine_for(url: str) -> Engine:
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
