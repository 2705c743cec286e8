"""Plain enums and the clock of stored rows; no SQLAlchemy here, so every layer may read them."""

from __future__ import annotations

import enum
from datetime import UTC, datetime


def utcnow() -> datetime:
    """Naive UTC: SQLite drops tzinfo, so every timestamp is naive UTC everywhere."""
    return datetime.now(UTC).replace(tzinfo=None)


class JobState(str, enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class ResultStatus(str, enum.Enum):
    """What happened to one configuration."""

    OK = "ok"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    # it ran and was timed, but its outputs fail the sweep's sanity bound (NaN/inf, or cosine
    # against FP32 below the bound): never plotted, ranked, recommended or taken as the knee
    WRONG_OUTPUTS = "wrong outputs"
