"""The mixed-precision search as queued work, started from the dashboard (or `submit --search`).

Each step of backend.engine.mixed.greedy_steps is one configuration of the job (static INT8 with
some nodes kept in FP32), run, explained and stored by the worker like any other: the steps appear
on the Jobs page as they land and join the accuracy-vs-speed chart on Compare. The worst node of a
step comes from its stored layer-loss ranking, its float islands from its stored profile.

search_plan is the tail of the sweep's plan (backend/jobs/plan.py): a generator that yields each
step and is sent its stored result, holding the job's results as they land, so nothing reads the
job again per step.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace

from backend.engine.interleave import Interleaved
from backend.engine.layerloss import NodeLoss, from_dicts
from backend.engine.mixed import (
    FP32,
    MIN_LOSS_DB,
    AccuracyBound,
    MixedSearch,
    MixedStep,
    apply_timing,
    greedy_steps,
    island_candidates,
)
from backend.engine.profile import stored_profile
from backend.errors import last_line
from backend.jobs.context import JobContext
from backend.jobs.plan import Plan, Step
from backend.knobs.serialize import to_json
from backend.launch import sandbox
from backend.launch.children import call_in_child
from backend.launch.limits import ChildLimits
from backend.models import library
from backend.models.graphread import node_names
from backend.results import AccuracyReport, ConfigurationResult, StoredResult, fp32_baseline
from backend.specs import GPU_PROVIDERS, Configuration, MeasureSettings, Precision, SweepSpec

# yields a step to measure, is sent its stored result, returns the step as the search sees it
Measured = Generator[Step, StoredResult | None, MixedStep]


class _Stopped(Exception):
    """A step did not give a measured, compared result (failed, cancelled): the search ends."""


def search_bases(configurations: list[Configuration]) -> list[Configuration]:
    """The plain ONNX Runtime static INT8 points a search starts from (one per provider/batch)."""
    return [
        c
        for c in configurations
        if c.precision == Precision.INT8_STATIC and c.backend == "onnxruntime" and not c.fp32_nodes
    ]


def on_evaluation_set(result: ConfigurationResult) -> AccuracyReport:
    """The agreement with FP32 the bound is checked on: on the user's evaluation set where the
    sweep has one (real inputs, usually more of them), else on the random accuracy inputs."""
    accuracy, evaluation = result.accuracy, result.evaluation
    assert accuracy is not None
    if evaluation is None or evaluation.cosine_similarity is None:
        return accuracy
    return replace(
        accuracy,
        cosine_similarity=evaluation.cosine_similarity,
        top1_agreement=evaluation.top1_agreement,
        samples=evaluation.samples,
    )


class _Steps:
    """Runs (or reuses, on a resumed job) the configuration of each step for one base point."""

    def __init__(self, spec: SweepSpec, held: list[StoredResult], context: JobContext) -> None:
        self.context = context
        self.bound = AccuracyBound.parse(spec.search_bound)
        self.held = held  # the job's results: those stored before, then each step's as it lands
        self.results: dict[tuple[str, ...], ConfigurationResult] = {}
        self.ran = 0  # steps this search ran itself (plain INT8 is the sweep's)
        self.errors: list[str] = []  # of those, the ones that gave no measured result

    def search(
        self, base: Configuration, fp32: StoredResult
    ) -> Generator[Step, StoredResult | None, MixedSearch]:
        """The greedy search from one base point, each of its steps yielded to be measured."""
        assert fp32.latency is not None
        steps = greedy_steps(self.bound, fp32.latency.p50, (), self.worst, self.islands)
        keep, why = next(steps)
        while True:
            step = yield from self.measure(base, fp32, keep, why)
            try:
                keep, why = steps.send(step)
            except StopIteration as end:
                return end.value

    def measure(
        self, base: Configuration, fp32: StoredResult, keep: tuple[str, ...], why: str
    ) -> Measured:
        config = replace(base, fp32_nodes=keep)
        result = next((r.result for r in self.held if r.config_key == config.key), None)
        ran_here = result is None
        if result is None:
            done = len(self.held) + 1
            self.context.raise_total(done)
            bound = f"{self.bound.metric} >= {self.bound.minimum}"
            note = f"Mixed-precision search step ({bound}): {why}."
            stored = yield Step(config, done, done, baseline=fp32, note=note)
            if stored is None:
                raise _Stopped(f"step '{why}' was not stored")
            self.held.append(stored)
            result = stored.result
            self.ran += 1
        # wrong outputs are measured too (they just never meet the bound, below)
        if not result.measured or result.accuracy is None or not result.latency:
            error = last_line(result.error or "cancelled") or "no result"
            if ran_here:
                self.errors.append(error)
            raise _Stopped(f"step '{why}' gave no measured result: {error}")
        self.results[config.fp32_nodes] = result
        accuracy = on_evaluation_set(result)
        met = self.bound.met(accuracy) and result.ok  # wrong outputs never meet a bound
        return MixedStep(config.fp32_nodes, result.latency.p50, accuracy, met, why)

    def worst(self, step: MixedStep) -> NodeLoss | None:
        losses = from_dicts(self.results[step.fp32_nodes].environment.get("accuracy_loss") or [])
        return next(
            (n for n in losses if n.loss_db >= MIN_LOSS_DB and n.node not in step.fp32_nodes), None
        )

    def islands(self, step: MixedStep) -> list[tuple[str, list[str]]]:
        """The float islands of the step's stored profile, as nodes of its stored built graph
        (an uploaded HardSwish is no node of it: its HardSigmoid and Mul are)."""
        result = self.results[step.fp32_nodes]
        profile = stored_profile(result.telemetry)
        if profile is None or not result.optimized_sha256:
            return []
        built = library.artifact_path(result.optimized_sha256)
        return island_candidates(profile, node_names(built))


def timing_note(settings: MeasureSettings, fp32: StoredResult, steps: _Steps) -> str:
    """The sweep's stability verdict for FP32 and the steps, which the worker timed one after
    another as separate configurations (not interleaved), with any contention note."""
    results = [fp32.result, *steps.results.values()]
    unstable = [r.config_key for r in results if not r.stable]
    head = (
        f"FP32 and the {len(steps.results)} step(s) were timed one after another, each in its "
        "own run (not interleaved); "
    )
    if unstable:
        head += (
            f"unstable: {len(unstable)} of {len(results)} did not settle within "
            f"{settings.stability_tolerance:.0%}; treat the verdict with care"
        )
    else:
        head += (
            f"stable: the last {settings.stable_windows} window medians of each agree within "
            f"{settings.stability_tolerance:.0%}"
        )
    busy = next((n for r in results for n in r.notes if n.startswith("While this was")), None)
    return head + (f". {busy}" if busy else ".")


def window_spread(settings: MeasureSettings, results: list[ConfigurationResult]) -> float:
    """The largest relative spread of any result's last window medians: how far apart two
    numbers timed in separate runs may be by noise alone."""
    windows = settings.stable_windows
    spreads = []
    for result in results:
        recent = (result.windows or [])[-windows:]
        mean = sum(recent) / len(recent) if recent else 0.0
        if mean > 0:
            spreads.append(max(abs(v - mean) for v in recent) / mean)
    return max(spreads, default=0.0)


def interleaved_in_child(
    settings: MeasureSettings,
    base: Configuration,
    fp32: StoredResult,
    found: MixedSearch,
    steps: _Steps,
) -> Interleaved | None:
    """FP32 and each distinct step timed again together, window by window, in one sandboxed
    child on their stored built models: the steps ran one after another in children of their
    own, so only this compares them under the same load. None (with an event saying why) when
    a built model is missing or the child fails; the verdict then says it was timed apart."""
    built = {FP32: fp32.result.optimized_sha256}
    for step in found.steps:
        result = steps.results.get(step.fp32_nodes)
        built.setdefault(found.key(step), result.optimized_sha256 if result else None)
    if not all(built.values()):
        steps.context.log("search: no interleaved timing (a built model is missing)")
        return None
    paths = {name: str(library.artifact_path(sha)) for name, sha in built.items() if sha}
    outcome = call_in_child(
        "backend.engine.mixed:time_built_models",
        paths,
        base.to_dict(),
        to_json(settings),
        timeout_s=settings.max_seconds * len(paths) + 300,
        what="The search's interleaved timing",
        sandboxed=True,
        binds=sandbox.Binds.of(read_only=list(paths.values()), gpu=base.provider != "cpu"),
        limits=ChildLimits.from_settings(gpu=base.provider in GPU_PROVIDERS),
    )
    if not outcome.ok:
        reason = last_line(outcome.error) or "it failed"
        steps.context.log(f"search: no interleaved timing: {reason}", "warning")
        return None
    return Interleaved.from_dict(outcome.value, settings)


def search_plan(
    spec: SweepSpec,
    configurations: list[Configuration],
    held: list[StoredResult],
    context: JobContext,
) -> Plan:
    """Search from each plain static INT8 point of the job against its FP32 result in `held` (the
    job's results so far, to which each step's is added as it is sent); log the measured steps
    and the verdict against FP32 in the job's events. Returns the job's error when the search
    ran steps and every one failed (the job must not say it succeeded), else None."""
    steps = _Steps(spec, held, context)
    for base in search_bases(configurations):
        fp32 = fp32_baseline(held, base)
        if fp32 is None or fp32.latency is None:
            context.log(f"search skipped for {base.label}: no FP32 result")
            continue
        try:
            found = yield from steps.search(base, fp32)
        except _Stopped as exc:
            context.log(f"search for {base.label} stopped: {exc}", "warning")
            continue
        timing = interleaved_in_child(spec.measure, base, fp32, found, steps)
        if timing is not None:
            apply_timing(found, timing)
        else:  # the numbers timed apart, said so, with their own spread as the noise
            found.stability = timing_note(spec.measure, fp32, steps)
            found.apart_noise = window_spread(spec.measure, [fp32.result, *steps.results.values()])
        for line in found.lines():
            context.log(f"search: {line}")
        context.log(f"search for {base.label}: {found.verdict()}")
    if steps.ran and len(steps.errors) >= steps.ran:
        return (
            f"the mixed-precision search ran {steps.ran} step(s) and every one failed; "
            f"first: {steps.errors[0]}"
        )
    return None
