"""A sweep's plan: a generator that yields the next configuration to measure and is sent the
result as stored, so adaptive searches (the knee, backend/jobs/knee.py; the mixed-precision
search, backend/jobs/mixedsearch.py) decide from results they hold, never by reading the job.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from backend.results import StoredResult
from backend.specs import Configuration


@dataclass(frozen=True)
class Step:
    """One configuration to measure, where it stands in the job, and what it is compared with."""

    config: Configuration
    index: int  # shown as [index/total] on the job's page
    total: int
    baseline: StoredResult | None = None  # the FP32 result its "why" lines are explained against
    note: str | None = None  # leads the result's lines (a search step's reason)


# Yields steps; is sent each step's result as stored (None when the write was refused); returns
# the job's error (a search whose every step failed) or None. A job that stops closes it.
Plan = Generator[Step, StoredResult | None, str | None]
