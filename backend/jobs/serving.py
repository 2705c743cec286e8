"""The worker's side of a serving study: start Triton per configuration, measure, store, stop.

Before a variant's first configuration the worker measures its costs on the real server
(backend/serving/costmodel.py measure_costs_on_server, as `serve recommend` and the prediction bench
do: every simulation input measured, none fitted to a point the predictions are judged on) and
stores that curve once per variant. Then for each batching policy it starts a real tritonserver
(backend/serving/server.py, which health-checks it and stops it whatever happens), measures each
load point from a child process (the load generator's CPU apart from the worker's), and stores
every point as it lands, its requests' samples in the same transaction (serving/samples.py). A
server that fails to start ends the job with Triton's own log line; a cancel kills the measuring
child (the cost measurement's too) and the server stops with the block.

ServingStudyKind is the `serving` entry of the job kinds (backend/jobs/kinds.py); it asks the
worker only through the job's public JobContext (stop check, events, lease, finish).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from backend.counts import counted
from backend.errors import UserError
from backend.jobs import prometheus
from backend.jobs.context import JobContext, JobOutcome
from backend.launch.children import run_in_child
from backend.serving.costmodel import CostMeasurementCancelled, measure_costs_on_server
from backend.serving.loadgen import load_time_limit_s, measure_load
from backend.serving.repository import plan_model
from backend.serving.samples import MeasuredLoad
from backend.serving.server import ServerEndpoint, serve
from backend.serving.study import (
    KIND,
    ServedVariant,
    ServingStudy,
    configuration_label,
    cost_key,
    load_label,
    point_key,
)
from backend.serving.types import BatchingPolicy, LoadPoint
from backend.specs import MEASURE_PRESETS
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import serving as serving_store
from storage.repo.jobs import JobRow
from storage.states import JobState

COST_REQUESTS = 15  # requests per batch size of the measured cost curve
COST_SECONDS = 1.0  # each cost-measurement load (one, then four in flight; each probe)


class Cancelled(Exception):
    """The job was cancelled (or its lease lost) while a child measured: stop everything."""


class ServingStudyKind:
    """A serving study: Triton started on this host for each configuration."""

    name = KIND
    launchers = ("local",)

    def run(self, context: JobContext) -> JobOutcome:
        return ServingJob(context).run(context.job)

    def conclude(self, context: JobContext) -> JobOutcome:
        return ServingJob(context).conclude()


class ServingJob:
    """Runs one claimed serving study to its end through its JobContext (lease, cancel, finish)."""

    def __init__(self, context: JobContext) -> None:
        self.context = context

    def run(self, job: JobRow) -> JobOutcome:
        """The job's outcome: its state (RUNNING when the lease was lost) and why."""
        study = ServingStudy.from_dict(job.spec)
        done = serving_store.stored_keys(job.id)
        if done:
            job_store.log_event(
                job.id,
                f"resuming: {counted(len(done), 'load point')} and cost measurements already "
                "stored",
            )
        steps = [(v, p) for v in study.variants for p in study.policies]
        measured: set[str] = set()
        try:
            for index, (variant, policy) in enumerate(steps, start=1):
                wanted = [point_key(variant, policy, load) for load in study.loads]
                if all(key in done for key in wanted):
                    continue
                if self._should_stop(job):
                    break
                if variant.key not in measured:
                    self._measure_costs(job, study, variant, done)
                    measured.add(variant.key)
                label = configuration_label(variant, policy)
                job_store.log_event(job.id, f"[{index}/{len(steps)}] {label}")
                self._configuration(job, study, variant, policy, done)
        except Cancelled:
            pass
        return self.conclude()

    def _should_stop(self, job: JobRow) -> bool:
        return self.context.should_stop()

    def _measure_costs(
        self, job: JobRow, study: ServingStudy, variant: ServedVariant, done: set[str]
    ) -> None:
        """The variant's simulation inputs measured on the server, stored once (not when the
        study asks for no predictions or a resumed job has them)."""
        key = cost_key(variant)
        if not study.curve_sizes or key in done:
            return
        path = self._path(job.model_id, variant)
        sizes = study.cost_sizes
        planned = plan_model(path, BatchingPolicy(max(sizes)), dict(study.dims))
        if not planned.max_batch_size:  # a fixed-batch server takes its one shape only
            sizes = (1,)
        two = any(p.instance_count > 1 for p in study.policies)
        job_store.log_event(
            job.id,
            f"measuring {variant.name}'s costs on Triton: batch sizes {', '.join(map(str, sizes))}"
            + (", two instances" if two else "")
            + (f", a {study.delay_probe_us} us queue delay" if study.delay_probe_us else ""),
        )
        try:
            costs = measure_costs_on_server(
                path,
                sizes,
                requests_per_size=COST_REQUESTS,
                duration_s=COST_SECONDS,
                dims=dict(study.dims),
                intra_op_threads=study.intra_op_threads or None,
                two_instances=two,
                delay_probe_us=study.delay_probe_us,
                provider=study.provider,
                should_cancel=lambda: self._should_stop(job),
                runtime_env=study.runtime_env,
            )
        except CostMeasurementCancelled:
            raise Cancelled from None
        self._save(job, key, variant.name, serving_store.COSTS, asdict(costs.curve))

    def _configuration(
        self,
        job: JobRow,
        study: ServingStudy,
        variant: ServedVariant,
        policy: BatchingPolicy,
        done: set[str],
    ) -> None:
        """One server for one variant and policy; the metrics count it whatever the outcome."""
        started, outcome = time.monotonic(), "failed"
        try:
            with serve(
                self._path(job.model_id, variant),
                policy,
                dims=dict(study.dims),
                intra_op_threads=study.intra_op_threads or None,
                provider=study.provider,
                runtime_env=study.runtime_env,
            ) as server:
                ran = f"onnxruntime {server.loaded.version or '?'} ({server.runtime.name})"
                job_store.log_event(
                    job.id,
                    f"Triton ready on port {server.http_port} (pid {server.process.pid}), {ran}"
                    if server.process
                    else f"Triton ready, {ran}",
                )
                self._measure(job, study, variant, policy, server.endpoint, done)
            outcome = "ok"
        except Cancelled:
            outcome = "cancelled"
            raise
        finally:
            prometheus.WORKER.configuration_done(outcome, time.monotonic() - started, kind=KIND)

    def _measure(
        self,
        job: JobRow,
        study: ServingStudy,
        variant: ServedVariant,
        policy: BatchingPolicy,
        endpoint: ServerEndpoint,
        done: set[str],
    ) -> None:
        label = configuration_label(variant, policy)
        measure = MEASURE_PRESETS[study.measure]
        for load in study.loads:
            key = point_key(variant, policy, load)
            if key in done:
                continue
            if self._should_stop(job):
                raise Cancelled
            measured: MeasuredLoad = self._child(
                job,
                measure_load,
                endpoint,
                load,
                measure,
                timeout_s=load_time_limit_s(load),
                what="The load generator",
            )
            point, samples = measured.point, measured.samples
            stored = serving_store.StoredSamples(**samples.packed())
            self._save(job, key, label, serving_store.POINT, point.to_dict(), stored)
            prometheus.WORKER.serving_point(point.stable, point.generator_saturated)
            job_store.log_event(job.id, f"{label} | {load_label(load)}: {_summary(point)}")

    def _child(
        self, job: JobRow, func: Any, *args: Any, timeout_s: float, what: str, **kwargs: Any
    ) -> Any:
        """func in a limited child, killed on cancel; its UserError keeps its one sentence."""
        outcome = run_in_child(
            func,
            *args,
            timeout_s=timeout_s,
            should_cancel=lambda: self._should_stop(job),
            what=what,
            **kwargs,
        )
        if outcome.cancelled:
            raise Cancelled
        return outcome.value_or_raise(what)

    def _save(
        self,
        job: JobRow,
        key: str,
        label: str,
        kind: str,
        payload: dict,
        samples: serving_store.StoredSamples | None = None,
    ) -> None:
        """The point (with its requests' samples, in one transaction) or a warning why not."""
        saved = serving_store.save_point(
            job.id, key, label, kind, payload, lease=job_store.lease_of(job), samples=samples
        )
        if saved is None:
            held = self.context.still_held()
            why = "this worker lost the job" if not held else "it was already stored"
            job_store.log_event(job.id, f"{key}: not stored, {why}", level="warning")
            if not held:
                raise Cancelled

    def _path(self, model_id: int, variant: ServedVariant) -> Path:
        sha = variant.sha256 or model_store.model_file(model_id).sha256
        path = self.context.artifacts.path_for(sha)
        if not path.is_file():
            raise UserError(
                f"The file of {variant.name!r} is missing from the artifact store; "
                "optimize the model again."
            )
        return path

    def conclude(self) -> JobOutcome:
        """Lease lost or cancelled first (JobContext.interrupted), else the study succeeded."""
        return self.context.interrupted() or self.context.finish(JobState.SUCCEEDED)


def _summary(point: LoadPoint) -> str:
    verdict = "saturated client" if point.generator_saturated else point.stability_note
    return (
        f"{point.achieved_rps:.0f} req/s, p99 {point.latency.p99:.2f} ms, "
        f"mean batch {point.mean_batch:.1f}, {verdict.split(' (')[0]}"
    )
