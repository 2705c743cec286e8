"""Accounts: who may sign in, their role, and failed sign-ins (kept here, so lockout survives
restarts and holds across dashboard processes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError

from storage.clock import db_utcnow
from storage.db import session_scope
from storage.repo.rows import row_of
from storage.schema import User


class NameTaken(ValueError):
    """Another account already has this name."""


@dataclass(frozen=True)
class UserRow:
    id: int
    name: str
    password_hash: str | None
    role: str
    failed_attempts: int
    locked_until: datetime | None
    last_signin_at: datetime | None
    created_at: datetime


def create_user(name: str, password_hash: str | None, role: str) -> UserRow:
    try:
        with session_scope() as session:
            row = User(name=name, password_hash=password_hash, role=role, failed_attempts=0)
            session.add(row)
            session.flush()
            return row_of(UserRow, row)
    except IntegrityError:
        raise NameTaken(name) from None


def get_user(name: str) -> UserRow | None:
    with session_scope() as session:
        row = session.scalar(select(User).where(User.name == name))
        return row_of(UserRow, row) if row else None


def list_users() -> list[UserRow]:
    with session_scope() as session:
        return [row_of(UserRow, r) for r in session.scalars(select(User).order_by(User.name))]


def count_role(role: str) -> int:
    with session_scope() as session:
        return session.scalar(select(func.count()).select_from(User).where(User.role == role)) or 0


def _update(name: str, **values: object) -> bool:
    with session_scope() as session:
        return session.execute(update(User).where(User.name == name).values(**values)).rowcount > 0


def set_role(name: str, role: str) -> bool:
    return _update(name, role=role)


def set_password_hash(name: str, password_hash: str) -> bool:
    """A new password also lifts a lockout: an admin reset is how a locked user gets back in."""
    return _update(name, password_hash=password_hash, failed_attempts=0, locked_until=None)


def delete_user(name: str) -> bool:
    with session_scope() as session:
        return session.execute(delete(User).where(User.name == name)).rowcount > 0


def record_failure(name: str, max_failures: int, lock_seconds: float) -> datetime | None:
    """Count one failed sign-in in the database; returns the lock's end once the count is reached.

    The increment is one UPDATE, so concurrent attempts from several sessions all count.
    """
    with session_scope() as session:
        session.execute(
            update(User).where(User.name == name).values(failed_attempts=User.failed_attempts + 1)
        )
        count = session.scalar(select(User.failed_attempts).where(User.name == name))
        if count is None or count < max_failures:
            return None
        session.execute(
            update(User)
            .where(User.name == name)
            .values(locked_until=db_utcnow(lock_seconds), failed_attempts=0)
        )
        return session.scalar(select(User.locked_until).where(User.name == name))


def is_locked(name: str) -> bool:
    """Whether a lockout holds now, by the database's clock (the one that set it)."""
    with session_scope() as session:
        return bool(
            session.scalar(
                select(func.count())
                .select_from(User)
                .where(User.name == name, User.locked_until > db_utcnow())
            )
        )


def record_success(name: str) -> None:
    _update(name, failed_attempts=0, locked_until=None, last_signin_at=db_utcnow())
