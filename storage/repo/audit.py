"""The audit log: one row per mutation, opened before the action and closed with its outcome."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from storage.clock import db_utcnow
from storage.db import session_scope
from storage.repo.rows import row_of
from storage.schema import AuditEntry

STARTED = "started"  # a row left in this state means the process died during the action


@dataclass(frozen=True)
class AuditRow:
    id: int
    at: datetime
    actor: str
    action: str
    target: str
    detail: dict[str, Any]
    outcome: str
    error: str | None
    finished_at: datetime | None


def open_entry(actor: str, action: str, target: str, detail: dict[str, Any]) -> int:
    """Write (and commit) the entry before the action runs, so even a crash leaves a trace."""
    with session_scope() as session:
        row = AuditEntry(
            actor=actor[:255], action=action, target=target[:255], detail=detail, outcome=STARTED
        )
        session.add(row)
        session.flush()
        return row.id


def close_entry(entry_id: int, outcome: str, error: str | None = None) -> None:
    with session_scope() as session:
        session.execute(
            update(AuditEntry)
            .where(AuditEntry.id == entry_id)
            .values(outcome=outcome, error=error, finished_at=db_utcnow())
        )


def list_entries(limit: int = 200, actor: str | None = None) -> list[AuditRow]:
    with session_scope() as session:
        query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
        if actor is not None:
            query = query.where(AuditEntry.actor == actor)
        return [row_of(AuditRow, r) for r in session.scalars(query)]
