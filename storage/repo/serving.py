"""Serving-study and generation points: written once each, by the job's lease holder, as they
are measured.

A point is a load point measured on a real Triton server (kind "point") or a variant's
cost measurement: the latency curve with every per-request cost measured on the server
(kind "calibration", its first name, kept for stored rows; once per variant, which the
predictions beside the points simulate from).
Studies stored before kept a bare curve per configuration instead (kind "curve"): still listed,
never written now, and they predict nothing. A generation job (backend/jobs/generation.py) stores
each (variant, runtime, prompt, new tokens, sequences) point as kind "generation". The job's
progress counts the measured points only (load points or generation points).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from storage.db import session_scope
from storage.repo.jobs import Lease, fence
from storage.repo.rows import row_of
from storage.schema import Job, ServingPoint

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


def save_point(
    job_id: int,
    point_key: str,
    configuration: str,
    kind: str,
    payload: dict[str, Any],
    lease: Lease | None = None,
) -> ServingPointRow | None:
    """Store one point once; None when refused (the lease no longer holds, or already stored).

    Fenced like a sweep's result: the lease check and the insert share one transaction, so a
    worker that lost its job writes nothing, and the unique key keeps the first of two writers.
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
        try:
            with session.begin_nested():
                session.add(row)
                session.flush()
        except IntegrityError:
            return None
        done = session.scalar(
            select(func.count())
            .select_from(ServingPoint)
            .where(ServingPoint.job_id == job_id, ServingPoint.kind.in_(COUNTED))
        )
        session.execute(update(Job).where(Job.id == job_id).values(progress_done=done))
        return row_of(ServingPointRow, row)


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
