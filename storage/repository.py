"""Every read and write of the database goes through these functions; callers never write SQL."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError

from storage.artifacts import ArtifactStore
from storage.db import session_scope
from storage.schema import (
    Artifact,
    CompatCache,
    Event,
    Job,
    JobState,
    Model,
    Result,
    ResultSamples,
    Worker,
    utcnow,
)


@dataclass(frozen=True)
class ModelRow:
    id: int
    name: str
    sha256: str
    format: str
    size_bytes: int
    opset: int | None
    ir_version: int | None
    producer: str | None
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    op_histogram: dict[str, int]
    parameter_count: int
    node_count: int
    warnings: list[str]
    created_at: datetime


@dataclass(frozen=True)
class ArtifactRow:
    id: int
    model_id: int
    kind: str
    sha256: str
    size_bytes: int
    filename: str
    meta: dict[str, Any]
    created_at: datetime


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
class ResultRow:
    id: int
    job_id: int
    config_key: str
    configuration: dict[str, Any]
    status: str
    error: str | None
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    throughput: float | None
    peak_rss_mb: float | None
    payload: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class EventRow:
    id: int
    job_id: int | None
    level: str
    message: str
    created_at: datetime


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


@dataclass
class NewArtifact:
    """A file already in the artifact store, to be linked to a model."""

    kind: str
    sha256: str
    size_bytes: int
    filename: str
    meta: dict[str, Any] = field(default_factory=dict)


def _row(cls: type, obj: object) -> Any:
    values = {name: getattr(obj, name) for name in cls.__dataclass_fields__}
    if cls is JobRow:
        values["state"] = JobState(values["state"])
    return cls(**values)


# ---- models and artifacts -------------------------------------------------------------------


def create_model(
    *,
    name: str,
    sha256: str,
    format: str,
    size_bytes: int,
    metadata: dict[str, Any],
    artifacts: list[NewArtifact],
    url: str | None = None,
) -> ModelRow:
    """Insert a model and its artifacts in one transaction (all or nothing)."""
    with session_scope(url) as session:
        model = Model(
            name=name,
            sha256=sha256,
            format=format,
            size_bytes=size_bytes,
            opset=metadata.get("opset"),
            ir_version=metadata.get("ir_version"),
            producer=metadata.get("producer"),
            inputs=metadata.get("inputs", []),
            outputs=metadata.get("outputs", []),
            op_histogram=metadata.get("op_histogram", {}),
            parameter_count=metadata.get("parameter_count", 0),
            node_count=metadata.get("node_count", 0),
            warnings=metadata.get("warnings", []),
        )
        session.add(model)
        session.flush()
        for art in artifacts:
            session.add(
                Artifact(
                    model_id=model.id,
                    kind=art.kind,
                    sha256=art.sha256,
                    size_bytes=art.size_bytes,
                    filename=art.filename,
                    meta=art.meta,
                )
            )
        session.flush()
        return _row(ModelRow, model)


def list_models(url: str | None = None) -> list[ModelRow]:
    with session_scope(url) as session:
        models = session.scalars(select(Model).order_by(Model.created_at.desc(), Model.id.desc()))
        return [_row(ModelRow, m) for m in models]


def get_model(model_id: int, url: str | None = None) -> ModelRow | None:
    with session_scope(url) as session:
        model = session.get(Model, model_id)
        return _row(ModelRow, model) if model else None


def delete_model(model_id: int, store: ArtifactStore | None = None, url: str | None = None) -> None:
    """Delete a model with its jobs and results; blobs no other row references are removed."""
    with session_scope(url) as session:
        shas = set(session.scalars(select(Artifact.sha256).where(Artifact.model_id == model_id)))
        session.execute(delete(Model).where(Model.id == model_id))
        session.flush()
        still_used = set(session.scalars(select(Artifact.sha256).where(Artifact.sha256.in_(shas))))
    if store is not None:
        for sha in shas - still_used:
            store.delete(sha)


def add_artifact(model_id: int, art: NewArtifact, url: str | None = None) -> ArtifactRow:
    """Link a stored file to a model; linking the same content twice returns the existing row."""
    with session_scope(url) as session:
        existing = session.scalar(
            select(Artifact).where(
                Artifact.model_id == model_id,
                Artifact.kind == art.kind,
                Artifact.sha256 == art.sha256,
            )
        )
        if existing:
            return _row(ArtifactRow, existing)
        row = Artifact(
            model_id=model_id,
            kind=art.kind,
            sha256=art.sha256,
            size_bytes=art.size_bytes,
            filename=art.filename,
            meta=art.meta,
        )
        session.add(row)
        try:
            session.flush()
        except IntegrityError:
            session.rollback()
            return add_artifact(model_id, art, url)
        return _row(ArtifactRow, row)


def list_artifacts(model_id: int, url: str | None = None) -> list[ArtifactRow]:
    with session_scope(url) as session:
        rows = session.scalars(
            select(Artifact).where(Artifact.model_id == model_id).order_by(Artifact.id)
        )
        return [_row(ArtifactRow, a) for a in rows]


def model_file(model_id: int, url: str | None = None) -> ArtifactRow:
    """The ONNX file to optimize: the converted one for SavedModels, else the original."""
    arts = list_artifacts(model_id, url)
    for kind in ("converted", "original"):
        for art in arts:
            if art.kind == kind and art.filename.endswith(".onnx"):
                return art
    raise LookupError(f"model {model_id} has no ONNX artifact")


# ---- jobs -----------------------------------------------------------------------------------


def create_job(
    model_id: int,
    spec: dict[str, Any],
    total: int,
    label: str | None = None,
    max_attempts: int = 3,
    url: str | None = None,
) -> JobRow:
    with session_scope(url) as session:
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
        return _row(JobRow, job)


def get_job(job_id: int, url: str | None = None) -> JobRow | None:
    with session_scope(url) as session:
        job = session.get(Job, job_id)
        return _row(JobRow, job) if job else None


def list_jobs(
    model_id: int | None = None,
    states: list[JobState] | None = None,
    limit: int | None = None,
    url: str | None = None,
) -> list[JobRow]:
    with session_scope(url) as session:
        query = select(Job).order_by(Job.id.desc())
        if model_id is not None:
            query = query.where(Job.model_id == model_id)
        if states:
            query = query.where(Job.state.in_([s.value for s in states]))
        if limit:
            query = query.limit(limit)
        return [_row(JobRow, j) for j in session.scalars(query)]


def count_jobs_by_state(url: str | None = None) -> dict[str, int]:
    with session_scope(url) as session:
        rows = session.execute(select(Job.state, func.count()).group_by(Job.state))
        return {state: count for state, count in rows}


def claim_job(
    worker_id: str, lease_seconds: float, job_id: int | None = None, url: str | None = None
) -> JobRow | None:
    """Atomically take the oldest queued job (or job_id), requeueing jobs whose lease expired.

    The conditional UPDATE is the lock: two workers racing for one row cannot both match it.
    """
    now = utcnow()
    with session_scope(url) as session:
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
                return _row(JobRow, job)
        return None


def renew_lease(job_id: int, worker_id: str, lease_seconds: float, url: str | None = None) -> bool:
    """Extend a running job's lease; False when the job is no longer this worker's."""
    with session_scope(url) as session:
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
    url: str | None = None,
) -> bool:
    """Move a running job to a final state; False when it is not (any longer) ours to finish."""
    with session_scope(url) as session:
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


def cancel_job(job_id: int, url: str | None = None) -> JobState:
    """Cancel a queued job now; ask a running one to stop (the worker kills its child)."""
    with session_scope(url) as session:
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


def is_cancel_requested(job_id: int, url: str | None = None) -> bool:
    with session_scope(url) as session:
        return bool(session.scalar(select(Job.cancel_requested).where(Job.id == job_id)))


def retry_job(job_id: int, url: str | None = None) -> JobRow:
    """Queue a new job with the same model and spec as a finished one."""
    old = get_job(job_id, url)
    if old is None:
        raise LookupError(f"no job {job_id}")
    return create_job(old.model_id, old.spec, old.progress_total, label=old.label, url=url)


# ---- results --------------------------------------------------------------------------------


def save_result(
    job_id: int, payload: dict[str, Any], samples_ms: list[float], url: str | None = None
) -> ResultRow:
    """Store one configuration's result; a second write of the same key replaces the first."""
    latency = payload.get("latency") or {}
    with session_scope(url) as session:
        existing = session.scalar(
            select(Result).where(
                Result.job_id == job_id, Result.config_key == payload["config_key"]
            )
        )
        if existing is not None:
            session.delete(existing)
            session.flush()
        row = Result(
            job_id=job_id,
            config_key=payload["config_key"],
            configuration=payload["configuration"],
            status=payload["status"],
            error=payload.get("error"),
            p50_ms=latency.get("p50"),
            p90_ms=latency.get("p90"),
            p99_ms=latency.get("p99"),
            throughput=payload.get("throughput"),
            peak_rss_mb=payload.get("peak_rss_mb"),
            payload=payload,
        )
        session.add(row)
        session.flush()
        session.add(ResultSamples(result_id=row.id, samples_ms=list(samples_ms)))
        done = session.scalar(
            select(func.count()).select_from(Result).where(Result.job_id == job_id)
        )
        session.execute(update(Job).where(Job.id == job_id).values(progress_done=done))
        return _row(ResultRow, row)


def finished_config_keys(job_id: int, url: str | None = None) -> set[str]:
    with session_scope(url) as session:
        return set(session.scalars(select(Result.config_key).where(Result.job_id == job_id)))


def list_results(
    job_ids: list[int] | None = None,
    model_id: int | None = None,
    result_ids: list[int] | None = None,
    url: str | None = None,
) -> list[ResultRow]:
    with session_scope(url) as session:
        query = select(Result).order_by(Result.id)
        if job_ids is not None:
            query = query.where(Result.job_id.in_(job_ids))
        if result_ids is not None:
            query = query.where(Result.id.in_(result_ids))
        if model_id is not None:
            query = query.join(Job, Job.id == Result.job_id).where(Job.model_id == model_id)
        return [_row(ResultRow, r) for r in session.scalars(query)]


def result_samples(result_ids: list[int], url: str | None = None) -> dict[int, list[float]]:
    with session_scope(url) as session:
        rows = session.execute(
            select(ResultSamples.result_id, ResultSamples.samples_ms).where(
                ResultSamples.result_id.in_(result_ids)
            )
        )
        return {rid: list(samples) for rid, samples in rows}


# ---- events and workers ---------------------------------------------------------------------


def log_event(
    job_id: int | None, message: str, level: str = "info", url: str | None = None
) -> None:
    with session_scope(url) as session:
        session.add(Event(job_id=job_id, level=level, message=message))


def list_events(
    job_id: int | None = None, limit: int = 200, url: str | None = None
) -> list[EventRow]:
    with session_scope(url) as session:
        query = select(Event).order_by(Event.id.desc()).limit(limit)
        if job_id is not None:
            query = query.where(Event.job_id == job_id)
        return [_row(EventRow, e) for e in session.scalars(query)][::-1]


def register_worker(
    worker_id: str,
    hostname: str,
    pid: int,
    hardware: dict[str, Any],
    providers: dict[str, Any],
    url: str | None = None,
) -> None:
    with session_scope(url) as session:
        worker = session.get(Worker, worker_id) or Worker(id=worker_id)
        worker.hostname, worker.pid = hostname, pid
        worker.hardware, worker.providers = hardware, providers
        worker.started_at = worker.heartbeat_at = utcnow()
        session.add(worker)


def worker_heartbeat(worker_id: str, current_job_id: int | None, url: str | None = None) -> None:
    with session_scope(url) as session:
        session.execute(
            update(Worker)
            .where(Worker.id == worker_id)
            .values(heartbeat_at=utcnow(), current_job_id=current_job_id)
        )


def list_workers(
    alive_within_seconds: float | None = None, url: str | None = None
) -> list[WorkerRow]:
    with session_scope(url) as session:
        query = select(Worker).order_by(Worker.heartbeat_at.desc())
        if alive_within_seconds is not None:
            query = query.where(
                Worker.heartbeat_at >= utcnow() - timedelta(seconds=alive_within_seconds)
            )
        return [_row(WorkerRow, w) for w in session.scalars(query)]


# ---- compatibility cache --------------------------------------------------------------------


def get_compat(
    model_sha256: str, fingerprint: str, url: str | None = None
) -> dict[str, Any] | None:
    with session_scope(url) as session:
        return session.scalar(
            select(CompatCache.payload).where(
                CompatCache.model_sha256 == model_sha256, CompatCache.fingerprint == fingerprint
            )
        )


def put_compat(
    model_sha256: str, fingerprint: str, payload: dict[str, Any], url: str | None = None
) -> None:
    with session_scope(url) as session:
        session.execute(
            delete(CompatCache).where(
                CompatCache.model_sha256 == model_sha256, CompatCache.fingerprint == fingerprint
            )
        )
        session.add(
            CompatCache(model_sha256=model_sha256, fingerprint=fingerprint, payload=payload)
        )
