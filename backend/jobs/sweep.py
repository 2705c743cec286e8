"""The sweep kind: each configuration measured in a limited child, explained and stored as it lands.

The configurations come from the sweep's plan (sweep_plan, a generator: backend/jobs/plan.py),
which is sent each result as stored and keeps it: the knee skip (backend/jobs/knee.py), the FP32
baseline every other precision is explained against and the mixed-precision search
(backend/jobs/mixedsearch.py) all decide from the results the run holds. The job's results are
read once when it starts (a resumed job keeps what it stored) and once when it concludes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import settings
from backend.counts import counted
from backend.engine.run import ConfigurationTask
from backend.hardware import cpu_features
from backend.jobs import prometheus
from backend.jobs.annotate import annotate
from backend.jobs.context import JobContext, JobOutcome
from backend.jobs.knee import skip_reason
from backend.jobs.measuring import MEASURE_PRELOAD, measure_in_child, ordered_configurations
from backend.jobs.mixedsearch import search_plan
from backend.jobs.plan import Plan, Step
from backend.launch.folders import owned_folder
from backend.launch.forks import Forks
from backend.models.library import npz_filename
from backend.records import JobKind, stored_results
from backend.results import ConfigurationResult, StoredResult, fp32_baseline
from backend.specs import Precision, SweepSpec
from storage.repo import models as model_store
from storage.states import JobState


@dataclass(frozen=True)
class SweepSetup:
    """What every configuration of one job shares: the sweep, its files and the host."""

    spec: SweepSpec
    source: Path
    calibration: str | None
    evaluation: str | None  # path of the evaluation .npz in the artifact store
    evaluation_name: str | None
    op_histogram: dict[str, int]
    cpu: dict[str, bool]
    timeout_s: float
    output_dir: Path  # where children leave built graphs and profiles until they are stored
    forks: Forks | None = None  # the job's fork server: a fresh fork per configuration


def sweep_plan(spec: SweepSpec, stored: list[StoredResult], context: JobContext) -> Plan:
    """The sweep's configurations, FP32 first, less those already stored and those past their
    series' knee, then the mixed-precision search's steps. It keeps every result it is sent, so
    the knee and each FP32 baseline come from the results it holds."""
    held = list(stored)
    done = {r.config_key for r in held}
    configurations = ordered_configurations(spec)
    for index, config in enumerate(configurations, start=1):
        if config.key in done:
            continue
        if spec.find_knee and (knee := skip_reason(spec, config, held)):
            context.log(f"{config.label}: not run, {knee}")
            continue
        baseline = fp32_baseline(held, config) if config.precision != Precision.FP32 else None
        landed = yield Step(config, index, len(configurations), baseline)
        if landed is not None:
            held.append(landed)
    if spec.search_bound:
        return (yield from search_plan(spec, configurations, held, context))
    return None


def all_failed(count: int, first_error: str) -> str:
    """The job's error when every configuration failed; one configuration reads singular."""
    if count == 1:
        return f"the only configuration failed: {first_error}"
    return f"all {count} configurations failed; first: {first_error}"


def conclude(context: JobContext, search_error: str | None = None) -> JobOutcome:
    """The job's final state from its stored results (lost lease and cancel come first);
    a mixed-precision search whose every step failed fails the job."""
    stopped = context.interrupted()
    if stopped is not None:
        return stopped
    results = stored_results(context.job.id)
    failures = [r for r in results if not r.ok]
    if results and len(failures) == len(results):
        error = all_failed(len(results), failures[0].error)
        return context.finish(JobState.FAILED, error)
    if search_error:
        return context.finish(JobState.FAILED, search_error)
    return context.finish(JobState.SUCCEEDED)


class SweepRun:
    """One sweep on this host: its plan's steps measured one after another."""

    def __init__(self, context: JobContext) -> None:
        self.context = context
        self.spec = SweepSpec.from_dict(context.job.spec)

    def run(self) -> JobOutcome:
        job = self.context.job
        stored = stored_results(job.id)  # once: what a resumed job already has
        if stored:
            self.context.log(f"resuming: {counted(len(stored), 'configuration')} already stored")
        # Children leave built files in the scratch folder; storing copies them, then it goes.
        with owned_folder(f"job{job.id}") as output_dir, Forks(MEASURE_PRELOAD) as forks:
            setup = self.setup(output_dir, forks)
            error = self.drive(sweep_plan(self.spec, stored, self.context), setup)
        return conclude(self.context, error)

    def setup(self, output_dir: Path, forks: Forks | None = None) -> SweepSetup:
        job, spec, artifacts = self.context.job, self.spec, self.context.artifacts
        model = model_store.get_model(job.model_id)

        def stored_path(sha256: str | None) -> str | None:
            return str(artifacts.path_for(sha256)) if sha256 else None

        return SweepSetup(
            spec=spec,
            source=artifacts.path_for(model_store.model_file(job.model_id).sha256),
            calibration=stored_path(spec.calibration_sha256),
            evaluation=stored_path(spec.evaluation_sha256),
            evaluation_name=npz_filename(job.model_id, spec.evaluation_sha256, "evaluation"),
            op_histogram=model.op_histogram if model else {},
            cpu=cpu_features(),
            timeout_s=spec.measure.max_seconds + settings.CONFIG_TIMEOUT_S.get(),
            output_dir=output_dir,
            forks=forks,
        )

    def drive(self, plan: Plan, setup: SweepSetup) -> str | None:
        """Measure and store each step the plan yields, sending it the stored result; the
        plan's return value is the job's error. A job that stops (a cancel, a lost lease)
        closes the plan where it stands."""
        context = self.context
        try:
            step = next(plan)
            while not context.should_stop():
                result = self.measure(step, setup)
                if result is None:  # cancelled while it ran
                    break
                stored = context.store_result(result)
                if context.on_result:
                    context.on_result(result, step.index, step.total)
                step = plan.send(stored)
        except StopIteration as end:
            return end.value
        plan.close()
        return None

    def measure(self, step: Step, setup: SweepSetup) -> ConfigurationResult | None:
        """One configuration in a limited child, explained; None when it was cancelled."""
        config = step.config
        self.context.log(f"[{step.index}/{step.total}] {config.label}")
        started = time.monotonic()
        task = ConfigurationTask(
            source_path=str(setup.source),
            configuration=config,
            measure=setup.spec.measure,
            output_dir=str(setup.output_dir),
            calibration_path=setup.calibration,
            evaluation_path=setup.evaluation,
            evaluation_sha256=setup.spec.evaluation_sha256,
            evaluation_name=setup.evaluation_name,
            min_cosine=setup.spec.min_cosine,
        )
        result = measure_in_child(
            task, setup.timeout_s, self.context.should_stop, setup.spec.runtime_env, setup.forks
        )
        if result is None:
            return None
        prometheus.WORKER.configuration_done(result.status.value, time.monotonic() - started)
        result.notes[:0] = [step.note] if step.note else []
        annotate(result, config, setup.op_histogram, setup.cpu, step.baseline)
        return result


class SweepKind:
    """A sweep of configurations: on this host, or on a Ray cluster (backend/cluster/)."""

    name = JobKind.SWEEP.value
    launchers = ("local", "ray")

    def run(self, context: JobContext) -> JobOutcome:
        return SweepRun(context).run()

    def conclude(self, context: JobContext) -> JobOutcome:
        return conclude(context)
