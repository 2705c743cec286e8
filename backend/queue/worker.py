"""The worker: claims queued jobs and runs each through its kind and launcher (backend/jobs/).

Run it with `python -m backend.queue.worker` (or `scripts/worker`, which restarts it when it dies).
Several workers may share one database: claiming is an atomic conditional UPDATE, leases are timed
on the database's clock, and a worker that dies loses its lease, so its job is requeued and resumed
by another worker without duplicating the configurations already stored. A claimed job's kind
(sweep, serving study: backend/jobs/kinds.py) says what runs; its launcher (this host, or the Ray
cluster at OPTIBOARD_RAY_ADDRESS: backend/jobs/launchers.py) says where; both see the job only
through its JobContext. Claiming and the lease stay here.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import time
import uuid

import settings
from backend.errors import UserError
from backend.host import describe_environment
from backend.jobs import prometheus
from backend.jobs.context import JobContext, JobOutcome, OnResult
from backend.jobs.kinds import kind_of
from backend.jobs.launchers import launcher_for
from backend.jobs.lease import Backoff, LeaseKeeper
from backend.launch import isolation, pids
from backend.queue.worker_args import add_worker_arguments
from backend.runtimes import all_provider_statuses
from storage.artifacts import ArtifactStore
from storage.db import DatabaseUnavailable
from storage.repo import jobs as job_store
from storage.repo import workers as worker_store
from storage.repo.jobs import JobRow
from storage.states import JobState

log = logging.getLogger("optiboard.worker")


class JobRunner:
    """Runs one claimed job to the end: its kind on its launcher (backend/jobs/), under a lease
    renewed in the background; shared by the worker process and the CLI's `run`."""

    def __init__(
        self,
        worker_id: str,
        lease_seconds: float | None = None,
        on_result: OnResult | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.lease_seconds = (
            settings.LEASE_SECONDS.get() if lease_seconds is None else lease_seconds
        )
        self.on_result = on_result
        self.store = ArtifactStore()

    def run(self, job: JobRow) -> JobOutcome:
        """The job's kind, run by its launcher; DatabaseUnavailable rises to the loop.

        A database outage is not the job's fault: the job keeps its lease until it expires and
        is then requeued and resumed, rather than being marked failed.
        """
        with LeaseKeeper(job_store.lease_of(job), self.lease_seconds) as keeper:
            context = JobContext(job, self.store, keeper, self.on_result)
            try:
                kind = kind_of(job)
                return launcher_for(kind).launch(kind, context)
            except DatabaseUnavailable:
                raise
            except UserError as exc:  # one sentence that says what to do (a cluster that is gone)
                return context.finish(JobState.FAILED, str(exc))
            except Exception as exc:  # the worker boundary: record, never crash the worker
                import traceback

                error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
                return context.finish(JobState.FAILED, error)


def worker_id_for_this_process() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def register(worker_id: str) -> None:
    providers = {
        name: [s.__dict__ for s in statuses] for name, statuses in all_provider_statuses().items()
    }
    environment = {**describe_environment(), "isolation": isolation.this_host().to_dict()}
    worker_store.register_worker(
        worker_id, socket.gethostname(), os.getpid(), environment, providers
    )


def serve(once: bool = False, poll_seconds: float = 1.0, lease_seconds: float | None = None) -> int:
    """Claim and run jobs until stopped; with once=True, until the queue is empty.

    A database that does not answer never ends the loop: the worker waits 1, 2, 4 ... up to
    OPTIBOARD_DB_RETRY_MAX_S seconds between tries and carries on once it answers again.
    """
    if lease_seconds is None:
        lease_seconds = settings.LEASE_SECONDS.get()
    worker_id = worker_id_for_this_process()
    backoff = Backoff(settings.DB_RETRY_MAX_S.get())
    registered = False
    processed = 0
    if prometheus.WORKER.start_from_settings():
        log.info("metrics on %s", settings.WORKER_METRICS_PORT.get())
    uncapped = pids.uncapped_reason()
    if uncapped:
        log.warning(uncapped)
    try:
        while True:
            try:
                if not registered:
                    register(worker_id)
                    registered = True
                    log.info("worker %s ready", worker_id)
                worker_store.worker_heartbeat(worker_id, None)
                if prometheus.WORKER.enabled:
                    prometheus.WORKER.observe_jobs(job_store.count_jobs_by_state())
                job = job_store.claim_job(worker_id, lease_seconds)
                backoff.reset()
                if job is None:
                    if once:
                        return processed
                    time.sleep(poll_seconds)
                    continue
                log.info("job %s claimed (attempt %s)", job.id, job.attempts)
                started = time.monotonic()
                outcome = JobRunner(worker_id, lease_seconds).run(job)
                seconds = time.monotonic() - started
                prometheus.WORKER.job_finished(outcome.state, seconds, kind=job.kind)
                log.info("job %s %s", job.id, outcome.state.value)
                processed += 1
            except DatabaseUnavailable as exc:
                delay = backoff.next_delay()
                log.warning("database unavailable, retrying in %.0f s: %s", delay, exc)
                time.sleep(delay)
    finally:  # the queue done, or Ctrl-C: not counted alive any more (a kill leaves the
        # heartbeat to age out, as before)
        if registered:
            _say_stopped(worker_id)


def _say_stopped(worker_id: str) -> None:
    """Best effort: a database that does not answer leaves the heartbeat to age out."""
    try:
        worker_store.worker_stopped(worker_id)
    except DatabaseUnavailable as exc:
        log.warning("could not mark worker %s stopped: %s", worker_id, exc)


def run_from_args(args: argparse.Namespace) -> int:
    """Serve the queue with the flags add_worker_arguments declared."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        serve(once=args.once, poll_seconds=args.poll_seconds, lease_seconds=args.lease_seconds)
    except KeyboardInterrupt:
        return 0
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="optiboard-worker", description=__doc__)
    add_worker_arguments(parser)
    args = parser.parse_args(argv)
    if settings.report_problems():  # scripts/worker restarts it: say why, once a start
        return 2
    return run_from_args(args)


if __name__ == "__main__":
    sys.exit(main())
