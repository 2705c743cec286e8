"""What a job runs, apart from the stored rows (backend.records re-exports it): each kind's spec
module declares its kind with it, and the CLI's parser imports those modules, no database."""

from __future__ import annotations

from enum import StrEnum


class JobKind(StrEnum):
    """What a job runs: a sweep of configurations, a serving study on Triton, or a generation
    benchmark of a generative model (backend/jobs/generation.py); the value is the jobs
    table's kind column (JobRow.kind)."""

    SWEEP = "sweep"
    SERVING = "serving"
    GENERATION = "generation"
    REGRESSION = "regression"  # the same configurations on two runtime environments
