"""Jobs and their events; every job state transition happens here, as a conditional UPDATE."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update

from storage.db import session_scope
from storage.repo.rows import row_of
from storage.schema import Event, Job
from storage.states import JobState, utcnow


@dataclass(frozen=True)
class JobRow:
    id: int
    model_id: int
    state: JobState
    spec: dict[str, Any]
    label: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    attempts: int
    max_attempts: int
    worker_id: str | None
    lease_expires_at: datetime | None
    progress_done: int
    progress_total: int
    cancel_requested: bool
    error: str | None


@dataclass(frozen=True)
class EventRow:
    id: int
    job_id: int | None
    level: str
    message: str
    created_at: datetime


def _job_row(job: Job) -> JobRow:
    return row_of(JobRow, job, state=JobState)


def create_job(
    model_id: int,
    spec: dict[str, Any],
    total: int,
    label: str | None = None,
    max_attempts: int = 3,
) -> JobRow:
    with session_scope() as session:
        job = Job(
            model_id=model_id,
            spec=spec,
            label=label,
            progress_total=total,
            max_attempts=max_attempts,
            state=JobState.QUEUED.value,
        )
        session.add(job)
        session.flush()
        session.add(Event(job_id=job.id, level="info", message=f"queued {total} configurations"))
        return _job_row(job)


def get_job(job_id: int) -> JobRow | None:
    with session_scope() as session:
        job = session.get(Job, job_id)
        return _job_row(job) if job else None


def list_jobs(
    model_id: int | None = None,
    states: list[JobState] | None = None,
    limit: int | None = None,
) -> list[JobRow]:
    with session_scope() as session:
        query = select(Job).order_by(Job.id.desc())
        if model_id is not None:
            query = query.where(Job.model_id == model_id)
        if states:
            query = query.where(Job.state.in_([s.value for s in states]))
        if limit:
            query = query.limit(limit)
        return [_job_row(j) for j in session.scalars(query)]


def count_jobs_by_state(url: str | None = None) -> dict[str, int]:
    with session_scope() as session:
        rows = session.execute(select(Job.state, func.count()).group_by(Job.state))
        return {state: count for state, count in rows}


def claim_job(worker_id: str, lease_seconds: float, job_id: int | None = None) -> JobRow | None:
    """Atomically take the oldest queued job (or job_id), requeueing jobs whose lease expired.

    The conditional UPDATE is the lock: two workers racing for one row cannot both match it.
    """
    now = utcnow()
    with session_scope() as session:
        expired = session.scalars(
            select(Job).where(Job.state == JobState.RUNNING.value, Job.lease_expires_at < now)
        ).all()
        for job in expired:
            if job.attempts >= job.max_attempts:
                job.state = JobState.FAILED.value
                job.finished_at = now
                job.error = (
                    f"worker {job.worker_id} stopped answering; gave up after "
                    f"{job.attempts} attempts"
                )
            else:
                job.state = JobState.QUEUED.value
                job.worker_id = None
            session.add(
                Event(
                    job_id=job.id,
                    level="warning",
                    message=f"lease expired: {job.error or 'requeued'}",
                )
            )
        session.flush()
        query = select(Job.id).where(
            Job.state == JobState.QUEUED.value, Job.cancel_requested.is_(False)
        )
        if job_id is not None:
            query = query.where(Job.id == job_id)
        candidates = session.scalars(query.order_by(Job.id).limit(5)).all()
        for candidate in candidates:
            claimed = session.execute(
                update(Job)
                .where(Job.id == candidate, Job.state == JobState.QUEUED.value)
                .values(
                    state=JobState.RUNNING.value,
                    worker_id=worker_id,
                    attempts=Job.attempts + 1,
                    started_at=func.coalesce(Job.started_at, now),
                    lease_expires_at=now + timedelta(seconds=lease_seconds),
                )
            )
            if claimed.rowcount == 1:
                session.add(
                    Event(job_id=candidate, level="info", message=f"claimed by {worker_id}")
                )
                session.flush()
                job = session.get(Job, candidate)
                session.refresh(job)
                return _job_row(job)
        return None


def renew_lease(job_id: int, worker_id: str, lease_seconds: float) -> bool:
    """Extend a running job's lease; False when the job is no longer this worker's."""
    with session_scope() as session:
        renewed = session.execute(
            update(Job)
            .where(
                Job.id == job_id, Job.worker_id == worker_id, Job.state == JobState.RUNNING.value
            )
            .values(lease_expires_at=utcnow() + timedelta(seconds=lease_seconds))
        )
        return renewed.rowcount == 1


def finish_job(
    job_id: int,
    state: JobState,
    error: str | None = None,
    worker_id: str | None = None,
) -> bool:
    """Move a running job to a final state; False when it is not (any longer) ours to finish."""
    with session_scope() as session:
        query = update(Job).where(Job.id == job_id, Job.state == JobState.RUNNING.value)
        if worker_id is not None:
            query = query.where(Job.worker_id == worker_id)
        done = session.execute(
            query.values(
                state=state.value, error=error, finished_at=utcnow(), lease_expires_at=None
            )
        )
        if done.rowcount == 1:
            msg = f"{state.value}" + (f": {error.splitlines()[-1]}" if error else "")
            session.add(Event(job_id=job_id, level="error" if error else "info", message=msg))
        return done.rowcount == 1


def cancel_job(job_id: int) -> JobState:
    """Cancel a queued job now; ask a running one to stop (the worker kills its child)."""
    with session_scope() as session:
        job = session.get(Job, job_id)
        if job is None:
            raise LookupError(f"no job {job_id}")
        state = JobState(job.state)
        if state == JobState.QUEUED:
            job.state = JobState.CANCELLED.value
            job.finished_at = utcnow()
            job.cancel_requested = True
            session.add(Event(job_id=job_id, level="info", message="cancelled while queued"))
        elif state == JobState.RUNNING:
            job.cancel_requested = True
            session.add(Event(job_id=job_id, level="info", message="cancel requested"))
        return JobState(job.state)


def is_cancel_requested(job_id: int) -> bool:
    with session_scope() as session:
        return bool(session.scalar(select(Job.cancel_requested).where(Job.id == job_id)))


def retry_job(job_id: int) -> JobRow:
    """Queue a new job with the same model and spec as a finished one."""
    old = get_job(job_id)
    if old is None:
        raise LookupError(f"no job {job_id}")
    return create_job(old.model_id, old.spec, old.progress_total, label=old.label)


def log_event(job_id: int | None, message: str, level: str = "info") -> None:
    with session_scope() as session:
        session.add(Event(job_id=job_id, level=level, message=message))


def list_events(job_id: int | None = None, limit: int = 200) -> list[EventRow]:
    with session_scope() as session:
        query = select(Event).order_by(Event.id.desc()).limit(limit)
        if job_id is not None:
            query = query.where(Event.job_id == job_id)
        return [row_of(EventRow, e) for e in session.scalars(query)][::-1]
