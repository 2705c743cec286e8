"""Jobs and their events; every job state transition happens here, as a conditional UPDATE.

Why long: one module owns every transition (queued, held at creation, claimed, renewed, requeued,
finished, cancelled), so a reader checks the state machine in one file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    String,
    and_,
    cast,
    exists,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from storage.clock import db_utcnow
from storage.db import session_scope
from storage.repo.rows import row_of
from storage.schema import Event, Job
from storage.states import JobState


@dataclass(frozen=True)
class JobRow:
    id: int
    model_id: int
    state: JobState
    kind: str  # what it runs; backend/records.JobKind names the kinds
    spec: dict[str, Any]  # read only by the kind's typed class (SweepSpec.from_dict, ...)
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
    submitted_by: str | None = None


@dataclass(frozen=True)
class EventRow:
    id: int
    job_id: int | None
    level: str
    message: str
    created_at: datetime


def _job_row(job: Job) -> JobRow:
    return row_of(JobRow, job, state=JobState)


HELD_LEASE_S = 300  # a job created held by a terminal: its first lease (renewed while it runs)


def create_job(
    model_id: int,
    spec: dict[str, Any],
    total: int,
    kind: str,  # required: no creator leaves a job to the column's default by forgetting it
    label: str | None = None,
    max_attempts: int = 3,
    unit: str = "configurations",
    submitted_by: str | None = None,
    held_by: str | None = None,
) -> JobRow:
    """unit names what `total` counts in the first event (a serving study counts load points).
    held_by: a worker id the job is inserted already claimed by (attempt 1, a HELD_LEASE_S
    lease), so no worker polling beside the terminal that runs it (`optiboard run`, `regress`)
    takes it."""
    held = dict(
        state=JobState.RUNNING.value,
        worker_id=held_by,
        attempts=1,
        started_at=db_utcnow(),
        lease_expires_at=db_utcnow(HELD_LEASE_S),
    )
    with session_scope() as session:
        job = Job(
            submitted_by=submitted_by,
            model_id=model_id,
            kind=kind,
            spec=spec,
            label=label,
            progress_total=total,
            max_attempts=max_attempts,
            **(held if held_by else {"state": JobState.QUEUED.value}),
        )
        session.add(job)
        session.flush()
        session.add(Event(job_id=job.id, level="info", message=f"queued {total} {unit}"))
        if held_by:
            session.add(Event(job_id=job.id, level="info", message=f"claimed by {held_by}"))
        session.flush()
        session.refresh(job)
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


def jobs_after(job_id: int) -> list[JobRow]:
    """Jobs queued after this one, newest first (a baseline's re-runs are among them)."""
    with session_scope() as session:
        query = select(Job).where(Job.id > job_id).order_by(Job.id.desc())
        return [_job_row(j) for j in session.scalars(query)]


def count_queued_jobs(submitted_by: str) -> int:
    """Jobs this submitter has waiting for a worker (queued, not yet claimed)."""
    with session_scope() as session:
        query = select(func.count()).where(
            Job.submitted_by == submitted_by, Job.state == JobState.QUEUED.value
        )
        return int(session.execute(query).scalar_one())


def count_jobs_by_state(url: str | None = None) -> dict[str, int]:
    with session_scope() as session:
        rows = session.execute(select(Job.state, func.count()).group_by(Job.state))
        return {state: count for state, count in rows}


@dataclass(frozen=True)
class Lease:
    """Who may write for a running job: the worker and its attempt number (the fencing token).

    A job requeued and claimed again gets a new attempt number, so a worker that lost its lease
    can never write for the new holder, even when it is the same worker id.
    """

    job_id: int
    worker_id: str
    attempt: int


def lease_of(job: JobRow) -> Lease:
    if job.worker_id is None:
        raise ValueError(f"job {job.id} is not held by a worker")
    return Lease(job.id, job.worker_id, job.attempts)


def held(lease: Lease) -> list[ColumnElement[bool]]:
    """WHERE clauses true only while the lease holder still owns the running job."""
    return [
        Job.id == lease.job_id,
        Job.state == JobState.RUNNING.value,
        Job.worker_id == lease.worker_id,
        Job.attempts == lease.attempt,
    ]


def fence(session: Session, lease: Lease) -> bool:
    """Whether the lease still holds, checked inside the caller's transaction: a no-op UPDATE
    that takes the job row's lock first, so a requeue waits for the caller's commit."""
    fenced = session.execute(
        update(Job).where(*held(lease)).values(progress_done=Job.progress_done)
    )
    return fenced.rowcount == 1


def _expired() -> list[ColumnElement[bool]]:
    return [Job.state == JobState.RUNNING.value, Job.lease_expires_at < db_utcnow()]


def requeue_expired() -> list[int]:
    """End or requeue running jobs whose lease ran out on the database's clock; their ids.

    Each is one conditional UPDATE: a lease renewed (or a job finished) a moment earlier no longer
    matches, so a fresh claim is never overwritten. A pending cancel ends the job cancelled, and
    queued jobs with a cancel request (left by older versions) are cancelled too.
    """
    now = db_utcnow()
    outcomes = [
        (
            [*_expired(), Job.cancel_requested.is_(True)],
            {"state": JobState.CANCELLED.value, "error": "cancelled after its worker stopped"},
            "lease expired with a cancel request: cancelled",
        ),
        (
            [Job.state == JobState.QUEUED.value, Job.cancel_requested.is_(True)],
            {"state": JobState.CANCELLED.value},
            "cancelled while queued",
        ),
        (
            [*_expired(), Job.attempts >= Job.max_attempts],
            {
                "state": JobState.FAILED.value,
                "error": literal("worker ")
                + func.coalesce(Job.worker_id, "?")
                + " stopped answering; gave up after "
                + cast(Job.attempts, String)
                + " attempts",
            },
            "lease expired: failed, no attempts left",
        ),
        (
            [*_expired(), Job.cancel_requested.is_(False)],
            {"state": JobState.QUEUED.value, "worker_id": None},
            "lease expired: requeued",
        ),
    ]
    if not _anything_to_requeue(outcomes):
        return []
    changed: list[int] = []
    for where, values, message in outcomes:  # one transaction each: no locks held across them
        final = values["state"] != JobState.QUEUED.value
        extra = {"finished_at": now} if final else {}
        with session_scope() as session:
            ids = session.scalars(
                update(Job)
                .where(*where)
                .values(**values, **extra, lease_expires_at=None)
                .returning(Job.id)
                .execution_options(synchronize_session=False)
            ).all()
            level = "warning" if values["state"] != JobState.CANCELLED.value else "info"
            session.add_all(Event(job_id=i, level=level, message=message) for i in ids)
            changed.extend(ids)
    return changed


def _anything_to_requeue(outcomes: list[tuple[list[ColumnElement[bool]], Any, str]]) -> bool:
    """A plain read first, so an idle poll takes no write lock (SQLite has one for the file)."""
    with session_scope() as session:
        any_match = or_(*(and_(*where) for where, _, _ in outcomes))
        return bool(session.scalar(select(exists().where(any_match))))


def claim_job(worker_id: str, lease_seconds: float, job_id: int | None = None) -> JobRow | None:
    """Take the oldest queued job (or job_id) after requeueing expired ones; None when none.

    PostgreSQL: SELECT ... FOR UPDATE SKIP LOCKED hands each worker a different row. SQLite (which
    ignores FOR UPDATE): the conditional UPDATE ... WHERE state='queued' is the lock, checked by its
    row count. Lease times come from the database's clock.
    """
    requeue_expired()
    with session_scope() as session:
        for _ in range(5):
            query = select(Job.id).where(
                Job.state == JobState.QUEUED.value, Job.cancel_requested.is_(False)
            )
            if job_id is not None:
                query = query.where(Job.id == job_id)
            candidate = session.scalar(
                query.order_by(Job.id).limit(1).with_for_update(skip_locked=True)
            )
            if candidate is None:
                return None
            claimed = session.execute(
                update(Job)
                .where(
                    Job.id == candidate,
                    Job.state == JobState.QUEUED.value,
                    Job.cancel_requested.is_(False),
                )
                .values(
                    state=JobState.RUNNING.value,
                    worker_id=worker_id,
                    attempts=Job.attempts + 1,
                    started_at=func.coalesce(Job.started_at, db_utcnow()),
                    lease_expires_at=db_utcnow(lease_seconds),
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


def renew_lease(
    job_id: int, worker_id: str, lease_seconds: float, attempt: int | None = None
) -> bool:
    """Extend a running job's lease; False when the job is no longer this worker's (attempt)."""
    with session_scope() as session:
        where = [Job.id == job_id, Job.worker_id == worker_id, Job.state == JobState.RUNNING.value]
        if attempt is not None:
            where.append(Job.attempts == attempt)
        renewed = session.execute(
            update(Job).where(*where).values(lease_expires_at=db_utcnow(lease_seconds))
        )
        return renewed.rowcount == 1


def finish_job(
    job_id: int,
    state: JobState,
    error: str | None = None,
    worker_id: str | None = None,
    attempt: int | None = None,
) -> bool:
    """Move a running job to a final state; False when it is not (any longer) ours to finish."""
    with session_scope() as session:
        query = update(Job).where(Job.id == job_id, Job.state == JobState.RUNNING.value)
        if worker_id is not None:
            query = query.where(Job.worker_id == worker_id)
        if attempt is not None:
            query = query.where(Job.attempts == attempt)
        done = session.execute(
            query.values(
                state=state.value, error=error, finished_at=db_utcnow(), lease_expires_at=None
            )
        )
        if done.rowcount == 1:
            msg = f"{state.value}" + (f": {error.splitlines()[-1]}" if error else "")
            session.add(Event(job_id=job_id, level="error" if error else "info", message=msg))
        return done.rowcount == 1


def cancel_job(job_id: int) -> JobState:
    """Cancel a queued job now; ask a running one to stop (the worker kills its child).

    Two conditional UPDATEs, so a claim that lands in between turns the cancel into a request
    instead of being overwritten; the loop covers a requeue landing in between the other way.
    """
    for _ in range(5):
        with session_scope() as session:
            cancelled = session.execute(
                update(Job)
                .where(Job.id == job_id, Job.state == JobState.QUEUED.value)
                .values(
                    state=JobState.CANCELLED.value,
                    cancel_requested=True,
                    finished_at=db_utcnow(),
                )
            )
            if cancelled.rowcount == 1:
                session.add(Event(job_id=job_id, level="info", message="cancelled while queued"))
                return JobState.CANCELLED
            requested = session.execute(
                update(Job)
                .where(Job.id == job_id, Job.state == JobState.RUNNING.value)
                .values(cancel_requested=True)
            )
            if requested.rowcount == 1:
                session.add(Event(job_id=job_id, level="info", message="cancel requested"))
                return JobState.RUNNING
            state = session.scalar(select(Job.state).where(Job.id == job_id))
            if state is None:
                raise LookupError(f"no job {job_id}")
            if JobState(state).finished:
                return JobState(state)
    raise RuntimeError(f"job {job_id} kept changing state while being cancelled")


def is_cancel_requested(job_id: int) -> bool:
    with session_scope() as session:
        return bool(session.scalar(select(Job.cancel_requested).where(Job.id == job_id)))


def retry_job(job_id: int, submitted_by: str | None = None) -> JobRow:
    """Queue a new job with the same model, kind and spec as a finished one, for who retried."""
    old = get_job(job_id)
    if old is None:
        raise LookupError(f"no job {job_id}")
    return create_job(
        old.model_id, old.spec, old.progress_total, old.kind, old.label, submitted_by=submitted_by
    )


def log_event(job_id: int | None, message: str, level: str = "info") -> None:
    with session_scope() as session:
        session.add(Event(job_id=job_id, level=level, message=message))


def list_events(job_id: int | None = None, limit: int = 200) -> list[EventRow]:
    with session_scope() as session:
        query = select(Event).order_by(Event.id.desc()).limit(limit)
        if job_id is not None:
            query = query.where(Event.job_id == job_id)
        return [row_of(EventRow, e) for e in session.scalars(query)][::-1]


def raise_total(job_id: int, total: int) -> None:
    """Grow a job's configuration count to `total` (never shrink it): the mixed-precision
    search adds its steps as configurations while the job runs."""
    with session_scope() as session:
        session.execute(
            update(Job)
            .where(Job.id == job_id, Job.progress_total < total)
            .values(progress_total=total)
        )
