"""The worker: claims queued jobs, runs each configuration in a child, writes results as they land.

Run it with `python -m backend.queue.worker` (or `scripts/worker`, which restarts it when it dies).
Several workers may share one database: claiming is an atomic conditional UPDATE, leases are timed
on the database's clock, and a worker that dies loses its lease, so its job is requeued and resumed
by another worker without duplicating the configurations already stored. With
OPTIBOARD_RAY_ADDRESS set, a claimed job's configurations run as Ray tasks on a cluster
(backend/cluster/dispatch.py); claiming, storing and concluding stay here.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import settings
from backend.engine.explain import cpu_features, explain
from backend.engine.layerloss import from_dicts
from backend.engine.profile import Profile
from backend.engine.run import ConfigurationTask
from backend.errors import UserError
from backend.host import describe_environment
from backend.queue import metrics
from backend.queue.jobs import fp32_baseline, npz_filename, stored_results
from backend.queue.knee import skip_reason
from backend.queue.lease import Backoff, LeaseKeeper
from backend.queue.measuring import measure_in_child, ordered_configurations
from backend.queue.mixedsearch import run_search
from backend.queue.produced import store_produced_files
from backend.queue.supervise import supervise
from backend.queue.worker_args import add_worker_arguments
from backend.records import is_serving, job_kind
from backend.results import ConfigurationResult, ResultStatus
from backend.runtimes import all_provider_statuses
from backend.specs import Configuration, Precision, SweepSpec
from storage.artifacts import ArtifactStore
from storage.db import DatabaseUnavailable
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.repo import workers as worker_store
from storage.repo.jobs import JobRow
from storage.states import JobState

log = logging.getLogger("optiboard.worker")


@dataclass
class JobOutcome:
    state: JobState
    error: str | None = None


@dataclass(frozen=True)
class SweepContext:
    """What every configuration of one job shares: the sweep, its files and the host."""

    spec: SweepSpec
    source: Path
    calibration: str | None
    evaluation: str | None  # path of the evaluation .npz in the artifact store
    evaluation_name: str | None
    op_histogram: dict[str, int]
    cpu: dict[str, bool]
    timeout_s: float
    output_dir: Path  # where children leave built graphs and profiles until _store copies them


class JobRunner:
    """Runs one claimed job to the end; shared by the worker process and the CLI's `run`."""

    def __init__(
        self,
        worker_id: str,
        lease_seconds: float | None = None,
        on_result: Callable[[ConfigurationResult, int, int], None] | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.lease_seconds = (
            settings.LEASE_SECONDS.get() if lease_seconds is None else lease_seconds
        )
        self.on_result = on_result
        self.store = ArtifactStore()
        self.keeper: LeaseKeeper | None = None

    @property
    def lost_lease(self) -> bool:
        return self.keeper is not None and self.keeper.lost

    def _should_stop(self, job_id: int) -> bool:
        return self.lost_lease or job_store.is_cancel_requested(job_id)

    def _finish(self, job: JobRow, state: JobState, error: str | None = None) -> bool:
        return job_store.finish_job(
            job.id, state, error=error, worker_id=self.worker_id, attempt=job.attempts
        )

    def run(self, job: JobRow) -> JobOutcome:
        """Run with the lease renewed in the background; DatabaseUnavailable rises to the loop.

        A database outage is not the job's fault: the job keeps its lease until it expires and
        is then requeued and resumed, rather than being marked failed.
        """
        with LeaseKeeper(job_store.lease_of(job), self.lease_seconds) as self.keeper:
            try:
                return self._run(job)
            except DatabaseUnavailable:
                raise
            except UserError as exc:  # one sentence that says what to do (a cluster that is gone)
                self._finish(job, JobState.FAILED, str(exc))
                return JobOutcome(JobState.FAILED, str(exc))
            except Exception as exc:  # the worker boundary: record, never crash the worker
                import traceback

                error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
                self._finish(job, JobState.FAILED, error)
                return JobOutcome(JobState.FAILED, error)

    def _run(self, job: JobRow) -> JobOutcome:
        if is_serving(job.spec):  # Triton on this host: start, health-check, measure, stop
            from backend.queue.serving_job import ServingJob

            return JobOutcome(*ServingJob(self).run(job))
        if settings.RAY_ADDRESS.get():  # each configuration a Ray task; storing stays here
            return supervise(self, job)
        spec = SweepSpec.from_dict(job.spec)
        configurations = ordered_configurations(spec)
        done = result_store.finished_config_keys(job.id)
        if done:
            job_store.log_event(job.id, f"resuming: {len(done)} configurations already stored")
        model = model_store.get_model(job.model_id)
        # Artifacts are copied into the store by _store, so the scratch folder goes afterwards.
        with tempfile.TemporaryDirectory(prefix=f"optiboard-job{job.id}-") as output_dir:
            context = SweepContext(
                spec=spec,
                source=self._source_path(job.model_id),
                calibration=self._stored_path(spec.calibration_sha256),
                evaluation=self._stored_path(spec.evaluation_sha256),
                evaluation_name=npz_filename(job.model_id, spec.evaluation_sha256, "evaluation"),
                op_histogram=model.op_histogram if model else {},
                cpu=cpu_features(),
                timeout_s=spec.measure.max_seconds + settings.CONFIG_TIMEOUT_S.get(),
                output_dir=Path(output_dir),
            )
            for index, config in enumerate(configurations, start=1):
                if config.key in done:
                    continue
                if self._should_stop(job.id):
                    break
                if spec.find_knee and (knee := skip_reason(spec, config, stored_results(job.id))):
                    job_store.log_event(job.id, f"{config.label}: not run, {knee}")
                    continue
                if self.run_one(job, config, context, (index, len(configurations))) is None:
                    break  # cancelled while it ran
            search_error = None
            if spec.search_bound and not self._should_stop(job.id):
                search_error = run_search(
                    job,
                    configurations,
                    lambda config, step, why: self.run_one(job, config, context, step, why),
                    lambda: self._should_stop(job.id),
                )
        return self._conclude(job, search_error)

    def _stored_path(self, sha256: str | None) -> str | None:
        return str(self.store.path_for(sha256)) if sha256 else None

    def run_one(
        self,
        job: JobRow,
        config: Configuration,
        context: SweepContext,
        step: tuple[int, int],
        note: str | None = None,
    ) -> ConfigurationResult | None:
        """Measure, explain and store one configuration; None when it was cancelled mid-run.

        `note` (a mixed-precision search step's reason) leads the result's lines.
        """
        job_store.log_event(job.id, f"[{step[0]}/{step[1]}] {config.label}")
        started = time.monotonic()
        result = self._measure(job, config, context)
        if result is None:
            return None
        metrics.WORKER.configuration_done(result.status.value, time.monotonic() - started)
        result.notes[:0] = [note] if note else []
        self._annotate(job.id, result, config, context.op_histogram, context.cpu)
        self._store(job, result)
        if self.on_result:
            self.on_result(result, *step)
        return result

    def _measure(
        self, job: JobRow, config: Configuration, context: SweepContext
    ) -> ConfigurationResult | None:
        """One configuration in a limited child; a child that fails becomes a failed result."""
        task = ConfigurationTask(
            source_path=str(context.source),
            configuration=config.to_dict(),
            measure=asdict(context.spec.measure),
            output_dir=str(context.output_dir),
            calibration_path=context.calibration,
            evaluation_path=context.evaluation,
            evaluation_sha256=context.spec.evaluation_sha256,
            evaluation_name=context.evaluation_name,
            min_cosine=context.spec.min_cosine,
        )
        return measure_in_child(task, context.timeout_s, lambda: self._should_stop(job.id))

    def _conclude(self, job: JobRow, search_error: str | None = None) -> JobOutcome:
        """The job's final state from its stored results (lost lease and cancel come first);
        a mixed-precision search whose every step failed fails the job."""
        if self.lost_lease:
            job_store.log_event(
                job.id, "lease lost; another worker owns this job now", level="warning"
            )
            return JobOutcome(JobState.RUNNING, "lease lost")
        if job_store.is_cancel_requested(job.id):
            self._finish(job, JobState.CANCELLED)
            return JobOutcome(JobState.CANCELLED)
        results = stored_results(job.id)
        failures = [r for r in results if not r.ok]
        if results and len(failures) == len(results):
            error = f"all {len(results)} configurations failed; first: {failures[0].error}"
            self._finish(job, JobState.FAILED, error)
            return JobOutcome(JobState.FAILED, error)
        if search_error:
            self._finish(job, JobState.FAILED, search_error)
            return JobOutcome(JobState.FAILED, search_error)
        self._finish(job, JobState.SUCCEEDED)
        return JobOutcome(JobState.SUCCEEDED)

    def _source_path(self, model_id: int) -> Path:
        artifact = model_store.model_file(model_id)
        return self.store.path_for(artifact.sha256)

    def _annotate(
        self,
        job_id: int,
        result: ConfigurationResult,
        config: Configuration,
        op_histogram: dict[str, int],
        cpu: dict[str, bool],
    ) -> None:
        """Add the plain "why" lines, against the FP32 result of the same provider and batch."""
        if not result.ok or result.latency is None:
            return
        speedup = None
        if config.precision != Precision.FP32:
            baseline = fp32_baseline(stored_results(job_id), config)
            if baseline is not None and baseline.latency is not None:
                speedup = baseline.latency.p50 / result.latency.p50
        profile_path = result.environment.get("profile_path")
        profile = Profile.load(Path(profile_path)) if profile_path else None
        # the rules of thumb explain ONNX Runtime's kernels; a profile explains any runtime's
        explained = speedup if config.backend == "onnxruntime" or profile else None
        result.notes.extend(
            explain(
                config.precision,
                config.provider,
                explained,
                op_histogram,
                cpu,
                result.accuracy,
                profile=profile,
                losses=from_dicts(result.environment.get("accuracy_loss") or []),
            )
        )
        if speedup is not None:
            result.telemetry["speedup_vs_fp32"] = speedup

    def _store(self, job: JobRow, result: ConfigurationResult) -> None:
        """Copy produced files into the store, then write the result and their links at once.

        The write is fenced by the lease, so a worker that lost its job writes no rows; the blobs
        it copied are then removed unless another row references them. The digests stay locked
        from the copy to the commit, so a remover never takes a blob whose link is committing
        (the LeaseKeeper thread keeps the lease through long copies).
        """
        produced, links = store_produced_files(self.store, job.id, result)
        shas = [link.sha256 for link in links]
        with self.store.locked(shas):
            for path, link in zip(produced, links, strict=True):
                if not self.store.exists(link.sha256):  # a remover took it before the lock
                    self.store.put_file(path)
            saved = result_store.save_result(
                job.id,
                result.to_dict(),
                result.samples_ms,
                lease=job_store.lease_of(job),
                artifacts=links,
            )
            if saved is None:
                model_store.remove_unreferenced(self.store, shas)
        for path in produced:
            path.unlink(missing_ok=True)
        if saved is None:
            held = self.keeper.renew_now() if self.keeper else True
            why = "this worker lost the job" if not held else "a result was already stored"
            job_store.log_event(job.id, f"{result.config_key}: not stored, {why}", level="warning")
            return
        status = (
            f"p50 {result.latency.p50:.3f} ms"
            if result.ok and result.latency
            else result.status.value
        )
        job_store.log_event(
            job.id,
            f"{result.config_key}: {status}",
            level="error" if result.status == ResultStatus.FAILED else "info",
        )


def worker_id_for_this_process() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def register(worker_id: str) -> None:
    providers = {
        name: [s.__dict__ for s in statuses] for name, statuses in all_provider_statuses().items()
    }
    worker_store.register_worker(
        worker_id, socket.gethostname(), os.getpid(), describe_environment(), providers
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
    if metrics.WORKER.start_from_settings():
        log.info("metrics on %s", settings.WORKER_METRICS_PORT.get())
    while True:
        try:
            if not registered:
                register(worker_id)
                registered = True
                log.info("worker %s ready", worker_id)
            worker_store.worker_heartbeat(worker_id, None)
            if metrics.WORKER.enabled:
                metrics.WORKER.observe_jobs(job_store.count_jobs_by_state())
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
            metrics.WORKER.job_finished(outcome.state, seconds, kind=job_kind(job.spec))
            log.info("job %s %s", job.id, outcome.state.value)
            processed += 1
        except DatabaseUnavailable as exc:
            delay = backoff.next_delay()
            log.warning("database unavailable, retrying in %.0f s: %s", delay, exc)
            time.sleep(delay)


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
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
