"""Signed-out session cookies, in the database so a sign-out survives a restart of the app and
holds on every app process sharing the database; each row is dropped once its cookie expired."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from storage.clock import db_utcnow
from storage.db import session_scope
from storage.schema import SessionRevocation


def revoke_session(session_id: str, expires_at: datetime) -> None:
    """Refuse this session from now until expires_at (naive UTC); expired rows are dropped."""
    with session_scope() as session:
        session.execute(
            delete(SessionRevocation).where(SessionRevocation.expires_at <= db_utcnow())
        )
    try:
        with session_scope() as session:
            session.add(SessionRevocation(session_id=session_id, expires_at=expires_at))
    except IntegrityError:
        pass  # signed out twice (two tabs, a replayed request): already refused


def is_revoked(session_id: str) -> bool:
    with session_scope() as session:
        found = session.scalar(
            select(SessionRevocation.session_id).where(SessionRevocation.session_id == session_id)
        )
    return found is not None
