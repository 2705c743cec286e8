"""Signed-out sessions are stored until their cookie would have expired, then dropped."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import func, select

from storage.clock import database_now
from storage.db import session_scope
from storage.repo import revocations
from storage.schema import SessionRevocation


def _rows() -> int:
    with session_scope() as session:
        return session.scalar(select(func.count()).select_from(SessionRevocation))


def test_a_revocation_holds_until_its_cookie_expires_then_is_dropped(data_dir: Path) -> None:
    now = database_now().replace(tzinfo=None)
    revocations.revoke_session("ran-out", now - timedelta(seconds=1))
    revocations.revoke_session("current", now + timedelta(hours=12))
    revocations.revoke_session("current", now + timedelta(hours=12))  # twice: still one row

    assert revocations.is_revoked("current") and not revocations.is_revoked("never-signed-out")
    assert _rows() == 1  # the expired one went when the next sign-out was written
