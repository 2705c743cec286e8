"""Worker registrations and heartbeats."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from storage.clock import db_utcnow
from storage.db import session_scope
from storage.repo.rows import row_of
from storage.schema import Worker


@dataclass(frozen=True)
class WorkerRow:
    id: str
    hostname: str
    pid: int
    hardware: dict[str, Any]
    providers: dict[str, Any]
    started_at: datetime
    heartbeat_at: datetime
    current_job_id: int | None
    stopped_at: datetime | None = None  # it exited: never alive, whatever its heartbeat


def register_worker(
    worker_id: str,
    hostname: str,
    pid: int,
    hardware: dict[str, Any],
    providers: dict[str, Any],
) -> None:
    with session_scope() as session:
        worker = session.get(Worker, worker_id) or Worker(id=worker_id)
        worker.hostname, worker.pid = hostname, pid
        worker.hardware, worker.providers = hardware, providers
        worker.started_at = worker.heartbeat_at = db_utcnow()
        worker.stopped_at = None
        session.add(worker)


def worker_heartbeat(worker_id: str, current_job_id: int | None) -> None:
    """Stamped with the database's clock, so a worker with a wrong clock still looks alive."""
    with session_scope() as session:
        session.execute(
            update(Worker)
            .where(Worker.id == worker_id)
            .values(heartbeat_at=db_utcnow(), current_job_id=current_job_id)
        )


def worker_stopped(worker_id: str) -> None:
    """The worker exited: it is no longer counted alive (its row stays: jobs name it)."""
    with session_scope() as session:
        session.execute(update(Worker).where(Worker.id == worker_id).values(stopped_at=db_utcnow()))


def list_workers(alive_within_seconds: float | None = None) -> list[WorkerRow]:
    """Every worker, or those alive: a heartbeat within the window and not stopped."""
    with session_scope() as session:
        query = select(Worker).order_by(Worker.heartbeat_at.desc())
        if alive_within_seconds is not None:
            query = query.where(Worker.heartbeat_at >= db_utcnow(-alive_within_seconds))
            query = query.where(Worker.stopped_at.is_(None))
        return [row_of(WorkerRow, w) for w in session.scalars(query)]


def get_worker(worker_id: str) -> WorkerRow | None:
    """One worker by its id, in one query (a job names the worker that ran it); None: unknown."""
    with session_scope() as session:
        worker = session.get(Worker, worker_id)
        return row_of(WorkerRow, worker) if worker is not None else None
