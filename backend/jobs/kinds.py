"""The registry of job kinds: what a claimed job runs, looked up by its row's kind column.

The kind is a column of the jobs table (storage/migrations 0012 filled it for every older job
from its spec's "kind" key; a spec without one was a sweep). Each kind's spec is read only by
its typed class (SweepSpec, ServingStudy, GenerationJobSpec, RegressionSpec), which still writes
"kind" into the spec for older workers; nothing reads it from there. Registering a kind is one
entry in KINDS and its module, whose object has the public interface of `Kind`; the loader
imports the module only when a job of that kind runs (the serving stack costs a worker about a
second at start otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from backend.errors import UserError
from backend.jobs.context import JobContext, JobOutcome
from backend.records import JobKind
from storage.repo.jobs import JobRow


class Kind(Protocol):
    """One kind of job, as the worker and the launchers use it."""

    name: str  # as stored in the job's kind column
    launchers: tuple[str, ...]  # the launchers that can run it (backend/jobs/launchers.py)

    def run(self, context: JobContext) -> JobOutcome:
        """Run the job on this host to its end and finish it (or leave it, lease lost)."""
        ...

    def conclude(self, context: JobContext) -> JobOutcome:
        """Finish a job another launcher ran, from what it stored."""
        ...


def _sweep() -> Kind:
    from backend.jobs.sweep import SweepKind

    return SweepKind()


def _serving_study() -> Kind:
    from backend.jobs.serving import ServingStudyKind

    return ServingStudyKind()


def _generation() -> Kind:
    from backend.jobs.generation import GenerationKind

    return GenerationKind()


def _regression() -> Kind:
    from backend.jobs.regression import RegressionKind

    return RegressionKind()


KINDS: dict[str, Callable[[], Kind]] = {
    JobKind.SWEEP.value: _sweep,
    JobKind.SERVING.value: _serving_study,
    JobKind.GENERATION.value: _generation,
    JobKind.REGRESSION.value: _regression,
}


def kind_of(job: JobRow) -> Kind:
    """The job's kind, or one sentence when this worker does not know it."""
    load = KINDS.get(job.kind)
    if load is None:
        raise UserError(
            f"This worker does not run jobs of kind {job.kind!r} (it runs {', '.join(KINDS)}); "
            "update the worker to this version of Optiboard and retry the job."
        )
    return load()
