"""The stored rows and plain enums that pages display, re-exported so pages never import storage.

These are frozen dataclasses and str enums with no database handle: reading them cannot write
anything, so handing them to the view layer keeps the one-way flow page -> backend -> storage.
get_job and stored_results read one job's row and its typed results by id, for every layer of
backend that needs them.
"""

from __future__ import annotations

from backend.errors import UserError
from backend.jobkind import JobKind
from backend.results import StoredResult
from storage.repo import jobs as job_store
from storage.repo import results as result_store
from storage.repo.jobs import EventRow, JobRow
from storage.repo.models import ArtifactRow, ModelRow
from storage.repo.results import ResultRow
from storage.repo.workers import WorkerRow
from storage.states import JobState, ResultStatus, utcnow

__all__ = [
    "ArtifactRow",
    "EventRow",
    "JobKind",
    "JobRow",
    "JobState",
    "ModelRow",
    "ResultRow",
    "ResultStatus",
    "WorkerRow",
    "get_job",
    "is_serving",
    "job_kind",
    "stored_results",
    "utcnow",
]


def job_kind(job: JobRow) -> JobKind:
    """The job's kind, from its column (0012 filled it from the spec for older jobs); one
    sentence for a kind this version does not know (a newer version queued the job)."""
    try:
        return JobKind(job.kind)
    except ValueError:
        raise UserError(
            f"Job {job.id} is of kind {job.kind!r}, which this version of Optiboard does not "
            f"know (it knows {', '.join(JobKind)}); update Optiboard to read it."
        ) from None


def is_serving(job: JobRow) -> bool:
    return job.kind == JobKind.SERVING


def stored_results(job_id: int) -> list[StoredResult]:
    """The job's results read as types, in the order they were stored (here with get_job, so a
    job kind or a baseline reads them without the queue facade)."""
    return [StoredResult.from_row(row) for row in result_store.list_results(job_ids=[job_id])]


def get_job(job_id: int) -> JobRow:
    """A job's row, or the sentence for one that does not exist; here, below the queue facade
    (which hands it on as jobs.get_job), so serving's commands read a job without the queue."""
    job = job_store.get_job(job_id)
    if job is None:
        raise UserError(f"There is no job {job_id}; list jobs to see which exist.")
    return job
