"""SQLAlchemy 2 typed schema; Alembic revisions in storage/migrations mirror it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from storage.clock import db_utcnow
from storage.states import JobState, ModelOrigin


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Model(Base):
    __tablename__ = "models"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    format: Mapped[str] = mapped_column(String(32))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    opset: Mapped[int | None] = mapped_column(Integer)
    ir_version: Mapped[int | None] = mapped_column(Integer)
    producer: Mapped[str | None] = mapped_column(String(255))
    inputs: Mapped[list[Any]] = mapped_column(JSON, default=list)
    outputs: Mapped[list[Any]] = mapped_column(JSON, default=list)
    op_histogram: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    parameter_count: Mapped[int] = mapped_column(BigInteger, default=0)
    node_count: Mapped[int] = mapped_column(Integer, default=0)
    warnings: Mapped[list[Any]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())
    # provenance (0014, storage.states.ModelOrigin): what it was made from and by which job;
    # both set to NULL when that model or job is deleted, so a variant outlives its source
    origin: Mapped[str] = mapped_column(String(16), server_default=ModelOrigin.UPLOAD.value)
    source_model_id: Mapped[int | None] = mapped_column(
        ForeignKey("models.id", ondelete="SET NULL"), index=True
    )
    source_job_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL", use_alter=True)  # jobs refer to models too
    )

    artifacts: Mapped[list[Artifact]] = relationship(
        back_populates="model", cascade="all, delete-orphan", passive_deletes=True
    )


class Artifact(Base):
    __tablename__ = "artifacts"
    __table_args__ = (UniqueConstraint("model_id", "kind", "sha256", name="uq_artifact"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    filename: Mapped[str] = mapped_column(String(255))
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())

    model: Mapped[Model] = relationship(back_populates="artifacts")


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    state: Mapped[str] = mapped_column(String(16), default=JobState.QUEUED.value, index=True)
    # what it runs (backend/jobs/kinds.py); its spec is read by that kind's typed class (0012)
    kind: Mapped[str] = mapped_column(String(16), server_default="sweep")
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    label: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())
    started_at: Mapped[datetime | None] = mapped_column(DateTime())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    worker_id: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime())
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    # who queued it (an account, or cli:<os user>), for the per-user cap on queued jobs
    submitted_by: Mapped[str | None] = mapped_column(String(255), index=True)


class Result(Base):
    """One measured (or failed) configuration; unique per job so retries never duplicate.

    The payload is the result as written (backend/results.py), its configuration included; the
    columns beside it are the few figures queries filter or sort on (0011 dropped the
    configuration's second copy)."""

    __tablename__ = "results"
    __table_args__ = (UniqueConstraint("job_id", "config_key", name="uq_result_config"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    config_key: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    throughput: Mapped[float | None] = mapped_column(Float)
    peak_rss_mb: Mapped[float | None] = mapped_column(Float)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())


class ResultSamples(Base):
    """Raw per-inference latencies, one row per result (kept apart so listings stay light)."""

    __tablename__ = "result_samples"

    result_id: Mapped[int] = mapped_column(
        ForeignKey("results.id", ondelete="CASCADE"), primary_key=True
    )
    samples_ms: Mapped[list[Any]] = mapped_column(JSON)


class Event(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), index=True
    )
    level: Mapped[str] = mapped_column(String(16), default="info")
    message: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())


class Worker(Base):
    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    hardware: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    providers: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    started_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())
    current_job_id: Mapped[int | None] = mapped_column(Integer)
    stopped_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)  # exited


class CompatCache(Base):
    """Compatibility matrix per model sha256 and runtime-version fingerprint."""

    __tablename__ = "compat_cache"
    __table_args__ = (UniqueConstraint("model_sha256", "fingerprint", name="uq_compat"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_sha256: Mapped[str] = mapped_column(String(64), index=True)
    fingerprint: Mapped[str] = mapped_column(String(255))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())


class User(Base):
    """A built-in account (or an identity-provider user given a role); lockout lives here too."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    password_hash: Mapped[str | None] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))
    failed_attempts: Mapped[int] = mapped_column(Integer, default=0)
    locked_until: Mapped[datetime | None] = mapped_column(DateTime())
    last_signin_at: Mapped[datetime | None] = mapped_column(DateTime())
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())
    # Every session cookie carries the value it was made under; a bump ends them all (sign-in
    # sessions outlive nothing an admin changes: password, role, removal).
    session_generation: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class AuditEntry(Base):
    """One mutation: opened before the action runs, closed with its outcome afterwards."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow(), index=True)
    actor: Mapped[str] = mapped_column(String(255), index=True)
    action: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(String(255), default="")
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    outcome: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime())


class ClusterNode(Base):
    """A Ray node as it announced itself: its hardware target and what the machine is."""

    __tablename__ = "cluster_nodes"

    node_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    target: Mapped[str] = mapped_column(String(64), index=True)
    hostname: Mapped[str] = mapped_column(String(255))
    hardware: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    providers: Mapped[list[Any]] = mapped_column(JSON, default=list)
    alive: Mapped[bool] = mapped_column(Boolean, default=True)
    announced_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())


class ServingPoint(Base):
    """One load point (kind "point") or latency curve (kind "curve") of a serving study, stored
    once per job and key as the worker measures it; the payload is the typed LoadPoint's dict."""

    __tablename__ = "serving_points"
    __table_args__ = (UniqueConstraint("job_id", "point_key", name="uq_serving_point"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    point_key: Mapped[str] = mapped_column(String(255))
    configuration: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())


class ServingPointSamples(Base):
    """A load point's raw per-request timings, one row per point (kept apart so listings stay
    light), written in the point's transaction; packed arrays (backend/serving/samples.py), each
    of `kept` values of the `total` successful requests; points stored before 0015 have none."""

    __tablename__ = "serving_point_samples"

    point_id: Mapped[int] = mapped_column(
        ForeignKey("serving_points.id", ondelete="CASCADE"), primary_key=True
    )
    encoding: Mapped[str] = mapped_column(String(32))
    kept: Mapped[int] = mapped_column(Integer)
    total: Mapped[int] = mapped_column(Integer)
    latency_ms: Mapped[bytes] = mapped_column(LargeBinary)
    sent_s: Mapped[bytes] = mapped_column(LargeBinary)
    scheduled_s: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)


class SessionRevocation(Base):
    """A signed-out session cookie, refused until the cookie itself would have expired."""

    __tablename__ = "session_revocations"

    session_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(), index=True)
    revoked_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())


class SigninThrottle(Base):
    """Failed sign-ins counted per client address or per account, and the wait they impose; a
    row per address an account signed in from too (failures 0), so that address is known."""

    __tablename__ = "signin_throttles"

    key: Mapped[str] = mapped_column(String(400), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    blocked_until: Mapped[datetime | None] = mapped_column(DateTime())
    updated_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow(), index=True)


class Baseline(Base):
    """A job pinned as a baseline: later re-runs of its configurations are judged against its
    stored raw samples (backend/baselines.py)."""

    __tablename__ = "baselines"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    pinned_by: Mapped[str] = mapped_column(String(255))
    pinned_at: Mapped[datetime] = mapped_column(DateTime(), default=db_utcnow())
