"""Batch sweeps that stop at the knee: doubling the batch until throughput stops growing.

The rule is perf_analyzer's: stop once the gain from one step to the next stays under 5% for
several steps in a row; a batch that runs out of memory (or fails) ends the series too. Larger
batches of the same configuration are then not run, and the job's log says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.results import StoredResult
from backend.specs import Configuration, SweepSpec

KNEE_GAIN = 0.05  # a step that adds less than 5% throughput counts as flat
KNEE_STEPS = 3  # this many flat steps in a row end the search


@dataclass(frozen=True)
class BatchPoint:
    """One measured batch of a series: its throughput, or None when it failed."""

    batch: int
    throughput: float | None
    out_of_memory: bool = False


def knee_stop(series: list[BatchPoint], gain: float = KNEE_GAIN, steps: int = KNEE_STEPS) -> str:
    """Why the series should grow no further ('' to go on); series in ascending batch order."""
    for point in series:
        if point.out_of_memory:
            return f"batch {point.batch} ran out of GPU memory"
        if point.throughput is None:
            return f"batch {point.batch} failed"
    gains = [
        b.throughput / a.throughput - 1
        for a, b in zip(series, series[1:], strict=False)
        if a.throughput and b.throughput
    ]
    if len(gains) >= steps and all(g < gain for g in gains[-steps:]):
        return (
            f"throughput grew less than {gain:.0%} per step over the last {steps} steps "
            f"(batch {series[-steps - 1].batch} to {series[-1].batch}); the knee is at batch "
            f"{best_batch(series)}"
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
        BatchPoint(
            r.configuration.batch_size,
            r.result.throughput if r.ok else None,
            bool(r.result.telemetry.get("out_of_memory")),
        )
        for r in stored
        if series_key(r.configuration) == key and r.configuration.batch_size < config.batch_size
    ]
    return sorted(points, key=lambda p: p.batch)


def skip_reason(spec: SweepSpec, config: Configuration, stored: list[StoredResult]) -> str:
    """Why a knee search leaves this configuration out ('' to run it)."""
    if not spec.find_knee:
        return ""
    return knee_stop(series_of(stored, config))
