"""Accounts: who may sign in, their role, their last sign-in. Failed sign-ins are counted in
storage/repo/throttle.py (the failed_attempts and locked_until columns are no longer used)."""

from __future__ import annotations

import secrets
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
    session_generation: int  # sessions carry it; end_sessions bumps it (backend/auth/sessions.py)


def create_user(name: str, password_hash: str | None, role: str) -> UserRow:
    try:
        with session_scope() as session:
            # A random first generation: a removed account's cookies never fit a new one's name.
            row = User(
                name=name,
                password_hash=password_hash,
                role=role,
                failed_attempts=0,
                session_generation=secrets.randbelow(1 << 30),
            )
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
    return _update(name, password_hash=password_hash)


def end_sessions(name: str) -> bool:
    """Bump the account's session generation: every session made before ends at its next run."""
    return _update(name, session_generation=User.session_generation + 1)


def session_generation(name: str) -> int | None:
    """The account's current session generation; None when there is no such account."""
    with session_scope() as session:
        return session.scalar(select(User.session_generation).where(User.name == name))


def delete_user(name: str) -> bool:
    with session_scope() as session:
        return session.execute(delete(User).where(User.name == name)).rowcount > 0


def record_success(name: str) -> None:
    _update(name, last_signin_at=db_utcnow())
