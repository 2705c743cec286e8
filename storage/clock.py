"""The database's clock as a SQL expression, so lease decisions never trust a worker's own clock.

Every worker asks the same server "what time is it?" inside the statement that decides, so a worker
whose clock is minutes off can neither expire a fresh lease nor keep a dead one alive. Values are
naive UTC, like every stored timestamp (see storage.states.utcnow).

On SQLite the "server" is the SQLite library inside each process, so the value comes from that
process's clock; processes sharing one SQLite file share one host and so one kernel clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Float, cast, literal, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from storage.db import session_scope


class _DbUtcNow(FunctionElement[Any]):
    """The database's time at the statement, plus an offset in seconds; compiled per dialect
    below."""

    type = DateTime()
    inherit_cache = True
    name = "db_utcnow"


def db_utcnow(plus_seconds: float = 0.0) -> _DbUtcNow:
    """The database's current UTC time (naive), shifted by plus_seconds (may be negative)."""
    return _DbUtcNow(cast(literal(float(plus_seconds)), Float))


def database_now() -> datetime:
    """The database's current time as an aware UTC datetime, for checks made outside a statement
    (link and session expiry) that must not trust the web host's clock."""
    with session_scope() as session:
        now = session.scalar(select(db_utcnow()))
    if isinstance(now, str):  # SQLite hands back the text strftime made
        now = datetime.fromisoformat(now)
    return now.replace(tzinfo=UTC)


def _offset(element: _DbUtcNow, compiler: Any, **kw: Any) -> str:
    (seconds,) = element.clauses
    return compiler.process(seconds, **kw)


@compiles(_DbUtcNow, "postgresql")
def _postgresql(element: _DbUtcNow, compiler: Any, **kw: Any) -> str:
    # the statement's own time, not now() (the transaction's start): a sign-in failure that
    # waited on the throttle row's lock was dated from before the wait, so under load its 1 s
    # lockout had ended before it was committed (seen in CI with eight concurrent failures)
    offset = _offset(element, compiler, **kw)
    return f"(timezone('utc', statement_timestamp()) + make_interval(secs => {offset}))"


@compiles(_DbUtcNow, "sqlite")
def _sqlite(element: _DbUtcNow, compiler: Any, **kw: Any) -> str:
    # '%f' is SS.SSS; three more zeros give the six-digit microseconds SQLAlchemy stores, so
    # stored strings and this one compare in the same format.
    return (
        f"strftime('%Y-%m-%d %H:%M:%f000', 'now', {_offset(element, compiler, **kw)} || ' seconds')"
    )


@compiles(_DbUtcNow)
def _other(element: _DbUtcNow, compiler: Any, **kw: Any) -> str:
    raise NotImplementedError(f"no database clock for dialect {compiler.dialect.name}")
