"""Automatic mixed precision: the fastest INT8/FP32 mix that meets an accuracy bound.

Greedy and measured at every step. Accuracy first: while the bound is not met, the node that
loses the most SQNR (backend.engine.layerloss) is kept in FP32. Then speed: for each op with no
int8 kernel that the profile shows between conversions (backend.engine.evidence), its nodes are
kept in FP32 too, and the step is kept only if it is faster and still meets the bound.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from backend.engine import accuracy, inputs, layerloss, variants
from backend.engine.evidence import float_islands
from backend.engine.interleave import Interleaved, interleaved
from backend.engine.measure import measure
from backend.engine.mixedresult import (  # noqa: F401 (the search's names, used from here)
    FP32,
    MIN_GAIN,
    AccuracyBound,
    MixedSearch,
    MixedStep,
)
from backend.engine.profile import Profile, profile_model
from backend.knobs.serialize import from_json
from backend.results import AccuracyReport
from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, MeasureSettings, Precision

MAX_STEPS = 8
MIN_LOSS_DB = 0.5  # a node losing less than this is noise, not a cause
SEED = 1234


@dataclass
class _Context:
    source: Path
    workdir: Path
    settings: MeasureSettings
    bound: AccuracyBound
    feeds: list[dict[str, np.ndarray]]
    reference: list[list[np.ndarray]]
    calibration: list[dict[str, np.ndarray]] | None
    threads: int = 0


def _timing(config: Configuration) -> SessionOptions:
    """The session every step is timed in: the search's provider and threads, the runtime's
    other options at their defaults, whatever the step's precision (the built graph carries it)."""
    return SessionOptions.plain(
        provider=config.provider, backend=config.backend, intra_op_threads=config.intra_op_threads
    )


def _run(ctx: _Context, config: Configuration) -> tuple[Path, float, AccuracyReport]:
    """Build the variant, time it with the clean loop, compare it with FP32 on the feeds."""
    variant = variants.build_variant(ctx.source, config, ctx.workdir, calibration=ctx.calibration)
    options = _timing(config)
    with get_runtime(config.backend).open(variant.path, options) as runner:
        timing = measure(lambda: runner.infer(ctx.feeds[0]), ctx.settings)
        outputs = [runner.infer(feed) for feed in ctx.feeds]
        report = accuracy.compare_outputs(ctx.reference, outputs, runner.output_names())
    return variant.path, float(np.median(timing.samples_ms)), report


def _step(ctx: _Context, base: Configuration, keep: list[str], why: str) -> tuple[Path, MixedStep]:
    path, p50, report = _run(ctx, replace(base, fp32_nodes=tuple(keep)))
    return path, MixedStep(tuple(sorted(keep)), p50, report, ctx.bound.met(report), why)


def _next_for_accuracy(ctx: _Context, path: Path, keep: list[str]) -> layerloss.NodeLoss | None:
    ranking = layerloss.rank_nodes(ctx.source, path, ctx.feeds)
    return next((r for r in ranking if r.loss_db >= MIN_LOSS_DB and r.node not in keep), None)


def island_candidates(profile: Profile, built: set[str]) -> list[tuple[str, list[str]]]:
    """(uploaded op, node names to keep in FP32) for each float island, costliest first: every
    computing part of its nodes (HardSwish: its HardSigmoid and its Mul, though the Mul ran in
    int8), as named in the built graph `built`, so that no conversion is left around them."""
    found = []
    for island in float_islands(profile):
        parts = {n.name for n in island.nodes + island.int8_nodes} | island.sources
        nodes = sorted(parts & built)
        if nodes:
            found.append((island.op_type, nodes))
    return found


def _speed_candidates(ctx: _Context, path: Path) -> list[tuple[str, list[str]]]:
    """The float islands of the step's profile, as nodes of its built graph."""
    names = {n.name for n in onnx.load(str(path), load_external_data=False).graph.node}
    options = SessionOptions.plain(intra_op_threads=ctx.threads)
    profile = profile_model(path, onnx.load(str(ctx.source)), options, ctx.feeds[0])
    return island_candidates(profile, names)


def greedy_steps(
    bound: AccuracyBound,
    fp32_p50_ms: float,
    start: tuple[str, ...],
    worst: Callable[[MixedStep], layerloss.NodeLoss | None],
    islands: Callable[[MixedStep], list[tuple[str, list[str]]]],
) -> Generator[tuple[tuple[str, ...], str], MixedStep, MixedSearch]:
    """The two greedy phases as a generator: it yields each step to measure (the nodes kept in
    FP32, and why) and is sent that step as measured, so any caller can measure it its own way
    (in process for the CLI, as queued configurations for the dashboard:
    backend.jobs.mixedsearch); it returns the search.

    Accuracy first: while the bound is missed, keep the worst node of the last step in FP32.
    Then speed: try keeping each costly float island of the best step in FP32 too.
    """
    result = MixedSearch(bound, fp32_p50_ms)
    keep = list(start)
    step = yield tuple(keep), "all quantizable nodes in INT8"
    result.steps.append(step)
    while not step.meets and len(result.steps) < MAX_STEPS:
        node = worst(step)
        if node is None or node.node in keep:
            break
        keep.append(node.node)
        why = f"kept {node.node} in FP32: it lost {node.loss_db:.1f} dB SQNR"
        step = yield tuple(keep), why
        result.steps.append(step)
    best = result.best
    if best is None:
        return result
    for op, nodes in islands(best)[:3]:
        if len(result.steps) >= MAX_STEPS:
            break
        trial = tuple(sorted(set(result.best.fp32_nodes) | set(nodes)))
        why = f"kept the {op} nodes in FP32 ({len(nodes)} built node(s)): no int8 kernel, Q/DQ"
        result.steps.append((yield trial, why))
    return result


def greedy(
    bound: AccuracyBound,
    fp32_p50_ms: float,
    start: tuple[str, ...],
    measure: Callable[[tuple[str, ...], str], MixedStep],
    worst: Callable[[MixedStep], layerloss.NodeLoss | None],
    islands: Callable[[MixedStep], list[tuple[str, list[str]]]],
) -> MixedSearch:
    """greedy_steps with every step measured by `measure`, one after another."""
    steps = greedy_steps(bound, fp32_p50_ms, start, worst, islands)
    keep, why = next(steps)
    while True:
        try:
            keep, why = steps.send(measure(keep, why))
        except StopIteration as end:
            return end.value


def search(
    source: Path,
    bound: AccuracyBound,
    workdir: Path,
    settings: MeasureSettings,
    base: Configuration | None = None,
    calibration: list[dict[str, np.ndarray]] | None = None,
) -> MixedSearch:
    """Greedy search for the fastest INT8/FP32 mix meeting `bound`; every step is measured here."""
    base = replace(
        base or Configuration(precision=Precision.INT8_STATIC), precision=Precision.INT8_STATIC
    )
    specs = inputs.input_specs_of(source)
    ranges = inputs.value_ranges(source)
    dims = dict(base.symbolic_dims)
    feeds = inputs.random_inputs(
        specs,
        base.batch_size,
        dims,
        count=max(settings.accuracy_samples, 2),
        seed=SEED,
        ranges=ranges,
    )
    fp32 = replace(base, precision=Precision.FP32, fp32_nodes=())
    ctx = _Context(Path(source), Path(workdir), settings, bound, feeds, [], calibration)
    ctx.threads = base.intra_op_threads
    with get_runtime(base.backend).open(
        Path(source),
        SessionOptions.plain(optimization_level="basic"),
    ) as runner:
        ctx.reference = [runner.infer(feed) for feed in feeds]
    _, fp32_p50, _ = _run(ctx, fp32)

    def built(step: MixedStep) -> Path:
        config = replace(base, fp32_nodes=step.fp32_nodes)
        return ctx.workdir / variants.variant_name(ctx.source, config)

    def measure(keep: tuple[str, ...], why: str) -> MixedStep:
        return _step(ctx, base, list(keep), why)[1]

    found = greedy(
        bound,
        fp32_p50,
        base.fp32_nodes,
        measure,
        lambda step: _next_for_accuracy(ctx, built(step), list(step.fp32_nodes)),
        lambda step: _speed_candidates(ctx, built(step)),
    )
    _time_together(ctx, base, fp32, found)
    return found


def _time_together(
    ctx: _Context, base: Configuration, fp32: Configuration, found: MixedSearch
) -> None:
    """Time plain FP32 and every distinct step again, interleaved window by window, so the
    verdict compares numbers taken under the same load; their p50s become these."""
    configs = {FP32: fp32}
    for step in found.steps:
        configs.setdefault(found.key(step), replace(base, fp32_nodes=step.fp32_nodes))
    paths = {n: ctx.workdir / variants.variant_name(ctx.source, c) for n, c in configs.items()}
    apply_timing(found, _interleave(paths, base, ctx.settings, ctx.feeds[0]))


def _interleave(
    paths: dict[str, Path],
    config: Configuration,
    settings: MeasureSettings,
    feed: dict[str, np.ndarray],
) -> Interleaved:
    """Each built model in a session of its own, all timed round-robin on one input."""
    options = _timing(config)
    with ExitStack() as stack:
        infers: dict[str, Callable[[], object]] = {}
        for name, path in paths.items():
            runner = stack.enter_context(get_runtime(config.backend).open(path, options))
            infers[name] = lambda r=runner: r.infer(feed)
        return interleaved(infers, settings)


def apply_timing(found: MixedSearch, timing: Interleaved) -> None:
    """The interleaved numbers replace those timed apart: FP32's p50 and each step's."""
    found.timing, found.stability = timing, ""
    found.fp32_p50_ms = timing.timed[FP32].p50_ms
    for step in found.steps:
        step.p50_ms = timing.timed[found.key(step)].p50_ms


def time_built_models(paths: dict[str, str], config: dict, measure: dict) -> dict:
    """Child side of a queued search's final timing (JSON in and out, run in the sandbox):
    FP32 and the steps' stored built models timed interleaved on one seeded input."""
    configuration = Configuration.from_dict(config)
    settings = from_json(MeasureSettings, measure)
    reference = Path(paths[FP32])
    feed = inputs.random_inputs(
        inputs.input_specs_of(reference),
        configuration.batch_size,
        dict(configuration.symbolic_dims),
        count=1,
        seed=SEED,
        ranges=inputs.value_ranges(reference),
    )[0]
    timing = _interleave({n: Path(p) for n, p in paths.items()}, configuration, settings, feed)
    return timing.to_dict()


def search_in_child(source: str, bound: str, measure: dict, base: dict) -> dict[str, Any]:
    """Child side of mixedcli.search_in_sandbox: the search in the child's scratch folder (the
    uploaded model is read-only there), as JSON."""
    found = search(
        Path(source),
        AccuracyBound.parse(bound),
        Path.cwd(),  # the scratch folder, removed with the child
        from_json(MeasureSettings, measure),
        Configuration.from_dict(base),
    )
    best = found.best
    return {
        "lines": found.lines(),
        "verdict": found.verdict(),
        "best": None if best is None else list(best.fp32_nodes),
    }


if __name__ == "__main__":  # the search runs in a sandboxed child now, from the CLI's module
    import sys

    print(
        "error: run the search as `python -m backend.engine.mixedcli` or `python -m backend.cli "
        "mixed` with the same arguments; this module is the search's engine only.",
        file=sys.stderr,
    )
    raise SystemExit(2)
