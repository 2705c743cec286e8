"""Failed sign-ins counted per key (a client address, an account), in the database so a throttle
holds across dashboard processes and restarts; every time comes from the database's clock."""

from __future__ import annotations

import time
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from storage.clock import db_utcnow
from storage.db import DatabaseUnavailable, session_scope
from storage.schema import SigninThrottle

FORGIVE_AFTER_S = 86400.0  # a key quiet this long starts counting from zero again
KEEP_S = 30 * 86400.0  # rows untouched this long are dropped (known addresses included)


def _ensure(key: str) -> None:
    try:
        with session_scope() as session:
            session.add(SigninThrottle(key=key, failures=0))
    except IntegrityError:
        pass  # already there (or made by a concurrent attempt)


def record_failure(key: str, free: int, longest_s: float) -> tuple[int, datetime | None]:
    """Count one failure; past `free` failures the key waits 1, 2, 4 ... s (at most longest_s)
    before its next try. Returns the count and the wait's end when this failure started one.

    The increment is one UPDATE, so concurrent attempts from several sessions all count. A failure
    that was not counted would be a free guess, so a busy database is tried again (the counting
    transaction rolled back whole, so a retry never counts twice)."""
    for attempt in range(_ATTEMPTS):
        try:
            return _count_failure(key, free, longest_s)
        except DatabaseUnavailable:
            if attempt == _ATTEMPTS - 1:
                raise
            time.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


_ATTEMPTS = 4


def _count_failure(key: str, free: int, longest_s: float) -> tuple[int, datetime | None]:
    with session_scope() as session:
        old = SigninThrottle.updated_at < db_utcnow(-KEEP_S)
        session.execute(delete(SigninThrottle).where(old))
    _ensure(key)
    mine = SigninThrottle.key == key
    with session_scope() as session:
        quiet = SigninThrottle.updated_at < db_utcnow(-FORGIVE_AFTER_S)
        session.execute(update(SigninThrottle).where(mine, quiet).values(failures=0))
        session.execute(
            update(SigninThrottle)
            .where(mine)
            .values(failures=SigninThrottle.failures + 1, updated_at=db_utcnow())
        )
        count = session.scalar(select(SigninThrottle.failures).where(mine)) or 0
        if count <= free:
            return count, None
        wait = min(float(longest_s), 2.0 ** min(count - free - 1, 40))
        session.execute(update(SigninThrottle).where(mine).values(blocked_until=db_utcnow(wait)))
        return count, session.scalar(select(SigninThrottle.blocked_until).where(mine))


def blocked_until(keys: list[str]) -> datetime | None:
    """The latest end of a wait still running for any of these keys (naive UTC), or None."""
    with session_scope() as session:
        found = session.scalar(
            select(SigninThrottle.blocked_until)
            .where(SigninThrottle.key.in_(keys), SigninThrottle.blocked_until > db_utcnow())
            .order_by(SigninThrottle.blocked_until.desc())
            .limit(1)
        )
    return _naive(found)


def _naive(value: datetime | str | None) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def clear(keys: list[str]) -> None:
    """Forget failures and waits (a successful sign-in, an admin's password reset)."""
    with session_scope() as session:
        session.execute(
            update(SigninThrottle)
            .where(SigninThrottle.key.in_(keys))
            .values(failures=0, blocked_until=None, updated_at=db_utcnow())
        )


def touch(key: str) -> None:
    """Keep a marker key (an address an account signed in from) for another KEEP_S."""
    _ensure(key)
    with session_scope() as session:
        session.execute(
            update(SigninThrottle).where(SigninThrottle.key == key).values(updated_at=db_utcnow())
        )


def exists(key: str) -> bool:
    with session_scope() as session:
        return (
            session.scalar(select(SigninThrottle.key).where(SigninThrottle.key == key)) is not None
        )
