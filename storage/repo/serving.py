"""Serving-study and generation points: written once each, by the job's lease holder, as they
are measured.

A point is a load point measured on a real Triton server (kind "point") or a variant's
cost measurement: the latency curve with every per-request cost measured on the server
(kind "calibration", its first name, kept for stored rows; once per variant, which the
predictions beside the points simulate from).
Studies stored before kept a bare curve per configuration instead (kind "curve"): still listed,
never written now, and they predict nothing. A generation job (backend/jobs/generation.py) stores
each (variant, runtime, prompt, new tokens, sequences) point as kind "generation". The job's
progress counts the measured points only (load points or generation points). A load point
measured since migration 0015 has its requests' raw timings in a row of its own (StoredSamples),
written in the point's transaction; listings never read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from storage.db import session_scope
from storage.repo.jobs import Lease, fence
from storage.repo.rows import row_of
from storage.schema import Job, ServingPoint, ServingPointSamples

POINT = "point"
COSTS = "calibration"  # a variant's measured costs; the stored kind keeps its first name
OLD_CURVE = "curve"  # per configuration, before cost measurements: read, ignored, never written
GENERATION = "generation"  # one point of a generation benchmark job
COUNTED = (POINT, GENERATION)  # the kinds a job's progress counts


@dataclass(frozen=True)
class ServingPointRow:
    id: int
    job_id: int
    point_key: str
    configuration: str
    kind: str
    payload: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class StoredSamples:
    """A load point's requests as stored: packed arrays (backend/serving/samples.py packs and
    reads them, `encoding` names how), `kept` values each of `total` successful requests."""

    encoding: str
    kept: int
    total: int
    latency_ms: bytes
    sent_s: bytes
    scheduled_s: bytes | None = None


def save_point(
    job_id: int,
    point_key: str,
    configuration: str,
    kind: str,
    payload: dict[str, Any],
    lease: Lease | None = None,
    samples: StoredSamples | None = None,
) -> ServingPointRow | None:
    """Store one point once, with its samples; None when refused (the lease no longer holds,
    or already stored).

    Fenced like a sweep's result: the lease check and the insert share one transaction, so a
    worker that lost its job writes nothing, and the unique key keeps the first of two writers.
    The samples go in that transaction too: a point is never stored without them, nor they
    without it (a refused samples row rolls the point back).
    """
    with session_scope() as session:
        if lease is not None and not fence(session, lease):
            return None
        row = ServingPoint(
            job_id=job_id,
            point_key=point_key,
            configuration=configuration,
            kind=kind,
            payload=payload,
        )
        if not _insert_once(session, row, samples):
            return None
        done = session.scalar(
            select(func.count())
            .select_from(ServingPoint)
            .where(ServingPoint.job_id == job_id, ServingPoint.kind.in_(COUNTED))
        )
        session.execute(update(Job).where(Job.id == job_id).values(progress_done=done))
        return row_of(ServingPointRow, row)


def _insert_once(session: Session, row: ServingPoint, samples: StoredSamples | None) -> bool:
    """The point and its samples in one savepoint; False when the unique key refuses the point
    (a second writer). A refused samples row rolls the point back with it and raises. One
    savepoint, not two steps: without a lease nothing has begun the transaction before it, and
    SQLite's driver then commits as the savepoint is released."""
    nested = session.begin_nested()
    try:
        session.add(row)
        session.flush()
    except IntegrityError:
        nested.rollback()
        return False
    try:
        if samples is not None:
            session.add(ServingPointSamples(point_id=row.id, **vars(samples)))
            session.flush()
    except BaseException:
        nested.rollback()
        raise
    nested.commit()
    return True


def stored_keys(job_id: int) -> set[str]:
    with session_scope() as session:
        query = select(ServingPoint.point_key).where(ServingPoint.job_id == job_id)
        return set(session.scalars(query))


def list_points(job_ids: list[int], kind: str | None = None) -> list[ServingPointRow]:
    """The jobs' points in the order they were stored."""
    with session_scope() as session:
        query = (
            select(ServingPoint).where(ServingPoint.job_id.in_(job_ids)).order_by(ServingPoint.id)
        )
        if kind is not None:
            query = query.where(ServingPoint.kind == kind)
        return [row_of(ServingPointRow, p) for p in session.scalars(query)]


def point_samples(point_ids: list[int]) -> dict[int, StoredSamples]:
    """The stored samples of those points, by point id (a point stored before 0015 has none)."""
    with session_scope() as session:
        rows = session.scalars(
            select(ServingPointSamples).where(ServingPointSamples.point_id.in_(point_ids))
        )
        return {
            r.point_id: StoredSamples(
                r.encoding, r.kept, r.total, r.latency_ms, r.sent_s, r.scheduled_s
            )
            for r in rows
        }
