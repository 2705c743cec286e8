"""Batch sweeps that stop at the knee: doubling the batch until throughput stops growing.

The rule is perf_analyzer's: stop once the gain from one step to the next stays under 5% for
several steps in a row, counting only steps between two stable measurements (a stalled run's
"flat" step is noise, not a knee: the search goes on past it); a batch that runs out of memory
(or fails, or computes wrong outputs) ends the series too. Larger batches of the same
configuration are then not run; the job's log and its configuration table say why. The knee
is the first batch of that flat run: the next doubling added under 5%.
knee_summary() says so after the search, with the knee's throughput and p50, or says that there
was no knee up to the largest batch and by how much throughput was still growing.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.results import ResultStatus, StoredResult
from backend.specs import Configuration, SweepSpec

KNEE_GAIN = 0.05  # a step that adds less than 5% throughput counts as flat
KNEE_STEPS = 3  # this many flat steps in a row end the search


@dataclass(frozen=True)
class BatchPoint:
    """One measured batch of a series: its throughput, or None when it failed."""

    batch: int
    throughput: float | None
    out_of_memory: bool = False
    p50_ms: float | None = None
    wrong_outputs: bool = False  # it ran, but its outputs failed the sweep's bound: not a knee
    stable: bool = True  # its measurement settled (engine/measure): only then a step counts


def knee_stop(series: list[BatchPoint], gain: float = KNEE_GAIN, steps: int = KNEE_STEPS) -> str:
    """Why the series should grow no further ('' to go on); series in ascending batch order."""
    for point in series:
        if point.out_of_memory:
            return f"batch {point.batch} ran out of GPU memory"
        if point.wrong_outputs:
            return f"batch {point.batch} computed wrong outputs"
        if point.throughput is None:
            return f"batch {point.batch} failed"
    gains = [
        (b.throughput / a.throughput - 1, a.stable and b.stable)
        for a, b in zip(series, series[1:], strict=False)
        if a.throughput and b.throughput
    ]
    last = gains[-steps:]
    if len(gains) >= steps and all(g < gain and steady for g, steady in last):
        return (
            f"throughput grew less than {gain:.0%} per step over the last {steps} steps "
            f"(batch {series[-steps - 1].batch} to {series[-1].batch}); the knee is at batch "
            f"{series[-steps - 1].batch}"
        )
    return ""


def best_batch(series: list[BatchPoint]) -> int | None:
    """The batch with the highest throughput, or None when none ran."""
    measured = [p for p in series if p.throughput]
    return max(measured, key=lambda p: p.throughput or 0.0).batch if measured else None


def series_key(config: Configuration) -> str:
    """A configuration's key without its batch: the results one knee search compares."""
    return config.key.replace(f"/b{config.batch_size}/", "/b*/")


def series_of(stored: list[StoredResult], config: Configuration) -> list[BatchPoint]:
    """The stored results of config's series with a smaller batch, in ascending batch order."""
    key = series_key(config)
    points = [
        _point(r)
        for r in stored
        if series_key(r.configuration) == key and r.configuration.batch_size < config.batch_size
    ]
    return sorted(points, key=lambda p: p.batch)


def _point(stored: StoredResult) -> BatchPoint:
    """A stored result as a point: only an ok result has a throughput the search may use."""
    latency = stored.latency if stored.ok else None
    return BatchPoint(
        stored.configuration.batch_size,
        stored.result.throughput if stored.ok else None,
        bool(stored.result.telemetry.get("out_of_memory")),
        latency.p50 if latency else None,
        stored.status == ResultStatus.WRONG_OUTPUTS,
        stored.result.stable is not False,
    )


def skip_reason(spec: SweepSpec, config: Configuration, stored: list[StoredResult]) -> str:
    """Why a knee search leaves this configuration out ('' to run it)."""
    if not spec.find_knee:
        return ""
    return knee_stop(series_of(stored, config))


def _at(point: BatchPoint) -> str:
    p50 = f", p50 {point.p50_ms:.3g} ms" if point.p50_ms else ""
    return f"{point.throughput:.0f} samples/s{p50}"


def knee_sentence(
    series: list[BatchPoint], gain: float = KNEE_GAIN, steps: int = KNEE_STEPS
) -> str:
    """The knee of one series (ascending batches) with its numbers, or why there is none."""
    end, reason = len(series), ""
    for n in range(1, len(series) + 1):  # where the search stopped, as it stopped it
        if reason := knee_stop(series[:n], gain, steps):
            end = n
            break
    head = series[:end]
    if reason and head[-1].throughput:  # stopped by the flat run: the knee is where it began
        knee, after = head[-steps - 1], head[-steps]
        grew = (after.throughput or 0.0) / (knee.throughput or 1.0) - 1
        cost = (
            f" for {after.p50_ms / knee.p50_ms:.1f}x the latency"
            if after.p50_ms and knee.p50_ms
            else ""
        )
        top = max((p for p in head if p.throughput), key=lambda p: p.throughput or 0.0)
        most = (
            f" (the most, {top.throughput:.0f} samples/s, at batch {top.batch})"
            if top.batch != knee.batch
            else ""
        )
        return (
            f"knee at batch {knee.batch}: {_at(knee)}; batch {after.batch} gained only "
            f"{grew:.1%} throughput{cost}{most}"
        )
    ran = [p for p in head if p.throughput]
    ended = f"; the search ended because {reason}" if reason else ""
    if shaky := [p.batch for p in ran if not p.stable]:
        ended += (
            f"; batch {', '.join(map(str, shaky))} measured unstable, so no flat step through "
            "it counted as the knee"
        )
    if not ran:
        return f"no knee: no batch ran{ended}"
    if len(ran) == 1:
        only = ran[0]
        return f"no knee up to batch {only.batch}: only batch {only.batch} ran ({_at(only)}){ended}"
    last, before = ran[-1], ran[-2]
    grew = (last.throughput or 0.0) / (before.throughput or 1.0) - 1
    still = "still grew" if grew > 0 else "changed by"
    return (
        f"no knee up to batch {last.batch}: throughput {still} {grew:.1%} from batch "
        f"{before.batch} to {last.batch} ({_at(last)}){ended}"
    )


def knee_summary(spec: SweepSpec, stored: list[StoredResult]) -> list[str]:
    """One sentence per series of a knee search, labelled, in the sweep's order; [] otherwise."""
    if not spec.find_knee:
        return []
    lines = []
    seen: set[str] = set()
    for config in spec.configurations():
        key = series_key(config)
        if key in seen:
            continue
        seen.add(key)
        points = sorted(
            (_point(r) for r in stored if series_key(r.configuration) == key),
            key=lambda p: p.batch,
        )
        if points:
            label = config.label.replace(f" b{config.batch_size}", "", 1)
            lines.append(f"{label}: {knee_sentence(points)}")
    return lines
