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


class ModelOrigin(str, enum.Enum):
    """How a library model came to be (models.origin, 0014): uploaded, a second copy of an
    upload (models.source_model_id names the first), or a variant a job or the library made
    from another model (source_model_id, and source_job_id when a job made it)."""

    UPLOAD = "upload"
    COPY = "copy"
    VARIANT = "variant"


class ResultStatus(str, enum.Enum):
    """What happened to one configuration."""

    OK = "ok"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    # it ran and was timed, but its outputs fail the sweep's sanity bound (NaN/inf, or cosine
    # against FP32 below the bound): never plotted, ranked, recommended or taken as the knee
    WRONG_OUTPUTS = "wrong outputs"
