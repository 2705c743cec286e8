"""The stored rows and plain enums that pages display, re-exported so pages never import storage.

These are frozen dataclasses and str enums with no database handle: reading them cannot write
anything, so handing them to the view layer keeps the one-way flow page -> backend -> storage.
"""

from __future__ import annotations

from storage.repo.jobs import EventRow, JobRow
from storage.repo.models import ArtifactRow, ModelRow
from storage.repo.results import ResultRow
from storage.repo.workers import WorkerRow
from storage.states import JobState, ResultStatus, utcnow

__all__ = [
    "ArtifactRow",
    "EventRow",
    "JobRow",
    "JobState",
    "ModelRow",
    "ResultRow",
    "ResultStatus",
    "WorkerRow",
    "utcnow",
]
