"""Results of configurations and their raw samples: written once, by the job's lease holder.

Latency statistics and the configuration live once, in the payload (the latency derived from the
samples by the engine); there are no separate latency or configuration columns to drift from it
(migrations 0003_typed_results and 0011_configuration_once dropped them). Readers parse rows into
backend.results.StoredResult.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from storage.db import session_scope
from storage.repo.jobs import Lease, fence
from storage.repo.models import NewArtifact
from storage.repo.rows import row_of
from storage.schema import Job, Result, ResultSamples


@dataclass(frozen=True)
class ResultRow:
    id: int
    job_id: int
    config_key: str
    status: str
    error: str | None
    throughput: float | None
    peak_rss_mb: float | None
    payload: dict[str, Any]
    created_at: datetime


def save_result(
    job_id: int,
    payload: dict[str, Any],
    samples_ms: list[float],
    lease: Lease | None = None,
    artifacts: Sequence[NewArtifact] = (),
) -> ResultRow | None:
    """Store one configuration's result once, with the links to the files it produced; None
    when it is refused.

    With a lease, the write happens only while that lease still holds the running job (checked and
    row-locked in the same transaction), so a worker that lost its job never writes. A stored
    result is never replaced: a second write of the same key is refused and the first one stays.
    The artifact links go in the same transaction, so a result never lacks its files' rows and a
    refused write links nothing (the caller then removes the blobs: remove_unreferenced). When
    two writers race past the existence check, the unique key decides, in a savepoint.
    """
    with session_scope() as session:
        if lease is not None and not fence(session, lease):
            return None
        exists = session.scalar(
            select(Result.id).where(
                Result.job_id == job_id, Result.config_key == payload["config_key"]
            )
        )
        if exists is not None:
            return None
        row = Result(
            job_id=job_id,
            config_key=payload["config_key"],
            status=payload["status"],
            error=payload.get("error"),
            throughput=payload.get("throughput"),
            peak_rss_mb=payload.get("peak_rss_mb"),
            payload=payload,
        )
        try:
            with session.begin_nested():  # two writers racing: the unique key keeps the first
                session.add(row)
                session.flush()
        except IntegrityError:
            return None
        session.add(ResultSamples(result_id=row.id, samples_ms=list(samples_ms)))
        _link(session, job_id, artifacts)
        done = session.scalar(
            select(func.count()).select_from(Result).where(Result.job_id == job_id)
        )
        session.execute(update(Job).where(Job.id == job_id).values(progress_done=done))
        return row_of(ResultRow, row)


def _link(session: Session, job_id: int, artifacts: Sequence[NewArtifact]) -> None:
    """Artifact rows for the job's model, once per (model, kind, content)."""
    model_id = session.scalar(select(Job.model_id).where(Job.id == job_id))
    for art in artifacts:
        if session.scalar(art.query(model_id)) is None:
            session.add(art.row(model_id))


def finished_config_keys(job_id: int) -> set[str]:
    with session_scope() as session:
        return set(session.scalars(select(Result.config_key).where(Result.job_id == job_id)))


def list_results(
    job_ids: list[int] | None = None,
    model_id: int | None = None,
    result_ids: list[int] | None = None,
) -> list[ResultRow]:
    with session_scope() as session:
        query = select(Result).order_by(Result.id)
        if job_ids is not None:
            query = query.where(Result.job_id.in_(job_ids))
        if result_ids is not None:
            query = query.where(Result.id.in_(result_ids))
        if model_id is not None:
            query = query.join(Job, Job.id == Result.job_id).where(Job.model_id == model_id)
        return [row_of(ResultRow, r) for r in session.scalars(query)]


def result_samples(result_ids: list[int]) -> dict[int, list[float]]:
    with session_scope() as session:
        rows = session.execute(
            select(ResultSamples.result_id, ResultSamples.samples_ms).where(
                ResultSamples.result_id.in_(result_ids)
            )
        )
        return {rid: list(samples) for rid, samples in rows}
