"""What a job kind and a launcher may ask of the worker for one claimed job, by public names.

A JobContext is made by the worker (backend/queue/worker.py JobRunner) for each job it runs, and
by the cluster driver child (backend/cluster/drive.py) for the job it dispatches. It holds the job,
the artifact store and the lease keeper, and offers: the stop check, the job's events and
progress total, storing one configuration's result under the lease, and finishing the job. Every
write is fenced by the lease, so a context whose worker lost the job writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from backend.jobs.lease import LeaseKeeper
from backend.jobs.produced import store_produced_files
from backend.results import ConfigurationResult, ResultStatus, StoredResult
from storage.artifacts import ArtifactStore
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.repo.jobs import JobRow
from storage.states import JobState

# told of each stored configuration: its result, its place in the sweep and the sweep's length
OnResult = Callable[[ConfigurationResult, int, int], None]


@dataclass
class JobOutcome:
    """How a run of a job ended: its state (RUNNING when the lease was lost) and why."""

    state: JobState
    error: str | None = None


class Foreground(Protocol):
    """This terminal as a worker of its own (backend/cli.py's): its job is created already
    claimed by `worker_id` (create_job's held_by), so a worker polling beside it never takes
    it first, and `run` runs that held job here."""

    worker_id: str

    def run(self, job: JobRow, on_result: OnResult | None = None) -> JobOutcome: ...


class JobContext:
    """One claimed job as a kind or a launcher sees it; see the module docstring."""

    def __init__(
        self,
        job: JobRow,
        artifacts: ArtifactStore,
        keeper: LeaseKeeper | None = None,
        on_result: OnResult | None = None,
    ) -> None:
        self.job = job
        self.artifacts = artifacts
        self.keeper = keeper  # None in the cluster driver child: its writes are fenced anyway
        self.on_result = on_result

    @property
    def lost_lease(self) -> bool:
        return self.keeper is not None and self.keeper.lost

    def should_stop(self) -> bool:
        """The lease is lost or someone asked to cancel the job."""
        return self.lost_lease or job_store.is_cancel_requested(self.job.id)

    def still_held(self) -> bool:
        """After a refused write: renew the lease now; False once the job is someone else's."""
        return self.keeper.renew_now() if self.keeper else True

    def log(self, message: str, level: str = "info") -> None:
        """One line on the job's page (its events)."""
        job_store.log_event(self.job.id, message, level=level)

    def raise_total(self, total: int) -> None:
        """Grow the job's configuration count (a search adds steps while it runs)."""
        job_store.raise_total(self.job.id, total)

    def finish(self, state: JobState, error: str | None = None) -> JobOutcome:
        """Move the job to its final state (refused by the database once it is not ours)."""
        job_store.finish_job(
            self.job.id, state, error=error, worker_id=self.job.worker_id, attempt=self.job.attempts
        )
        return JobOutcome(state, error)

    def interrupted(self) -> JobOutcome | None:
        """The outcome of a job that stopped early, or None: a lost lease leaves the job to the
        worker that owns it now (nothing is finished), a cancel finishes it CANCELLED."""
        if self.lost_lease:
            self.log("lease lost; another worker owns this job now", level="warning")
            return JobOutcome(JobState.RUNNING, "lease lost")
        if job_store.is_cancel_requested(self.job.id):
            return self.finish(JobState.CANCELLED)
        return None

    def store_result(self, result: ConfigurationResult) -> StoredResult | None:
        """Copy produced files into the store, then write the result and their links at once;
        the result as stored, or None when the write was refused.

        The write is fenced by the lease, so a worker that lost its job writes no rows; the blobs
        it copied are then removed unless another row references them. The digests stay locked
        from the copy to the commit, so a remover never takes a blob whose link is committing
        (the LeaseKeeper thread keeps the lease through long copies).
        """
        job = self.job
        produced, links = store_produced_files(self.artifacts, job.id, result)
        shas = [link.sha256 for link in links]
        with self.artifacts.locked(shas):
            for path, link in zip(produced, links, strict=True):
                if not self.artifacts.exists(link.sha256):  # a remover took it before the lock
                    self.artifacts.put_file(path)
            saved = result_store.save_result(
                job.id,
                result.to_dict(),
                result.samples_ms,
                lease=job_store.lease_of(job),
                artifacts=links,
            )
            if saved is None:
                model_store.remove_unreferenced(self.artifacts, shas)
        for path in produced:
            path.unlink(missing_ok=True)
        if saved is None:
            why = (
                "this worker lost the job"
                if not self.still_held()
                else "a result was already stored"
            )
            self.log(f"{result.config_key}: not stored, {why}", level="warning")
            return None
        status = (
            f"p50 {result.latency.p50:.3f} ms"
            if result.ok and result.latency
            else result.status.value
        )
        self.log(
            f"{result.config_key}: {status}",
            level="error" if result.status == ResultStatus.FAILED else "info",
        )
        return StoredResult.of(saved, result)  # the typed result just written, not re-read
