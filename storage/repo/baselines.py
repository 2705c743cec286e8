"""Pinned baselines: one row per pinned job (the re-runs name their baseline in their spec)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from storage.db import session_scope
from storage.repo.rows import row_of
from storage.schema import Baseline


@dataclass(frozen=True)
class BaselineRow:
    job_id: int
    pinned_by: str
    pinned_at: datetime


def pin(job_id: int, pinned_by: str) -> bool:
    """Pin the job; False when it already was (a second click, another tab)."""
    try:
        with session_scope() as session:
            session.add(Baseline(job_id=job_id, pinned_by=pinned_by[:255]))
    except IntegrityError:
        return False
    return True


def unpin(job_id: int) -> bool:
    """Unpin the job; False when it was not pinned."""
    with session_scope() as session:
        gone = session.execute(delete(Baseline).where(Baseline.job_id == job_id))
    return bool(gone.rowcount)


def get(job_id: int) -> BaselineRow | None:
    with session_scope() as session:
        row = session.get(Baseline, job_id)
        return row_of(BaselineRow, row) if row is not None else None


def list_pinned() -> list[BaselineRow]:
    """Every pinned job, the newest pin first."""
    with session_scope() as session:
        rows = session.scalars(select(Baseline).order_by(Baseline.pinned_at.desc()))
        return [row_of(BaselineRow, r) for r in rows]
