"""perf_analyzer's stability rule on one load point, for throughput and latency both.

The measurement is cut into windows (`stable_windows` equal time windows spanning the whole
point, or one window per Offline burst); it is stable when each of the last `stable_windows`
windows lies within `stability_tolerance` of their mean, in throughput and in average latency
(perf_analyzer's default latency metric). Unlike perf_analyzer the duration is fixed, not extended
until stable: an unstable point says so rather than running longer. perf_analyzer reports only
the windows it judged, and a point's figures are over its whole duration, so its windows span all
of it: windows of window_min_seconds judged only the last 0.2 s of a 5 s `quick` point, which
read "stable" through a slump in the 4.8 s before it and "±23%" from 0.1 s of jitter at its end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.specs import MeasureSettings


@dataclass(frozen=True)
class Verdict:
    stable: bool
    note: str


@dataclass(frozen=True)
class Completed:
    """One successful request: when it left, when it came back (s), and its Offline burst."""

    sent_s: float
    done_s: float
    burst: int | None = None

    @property
    def latency_ms(self) -> float:
        return 1000 * (self.done_s - self.sent_s)


def _windows(done: Sequence[Completed], measure: MeasureSettings) -> list[tuple[float, float]]:
    """(throughput per s, mean latency ms) per window; empty windows give (0, nan)."""
    bursts = sorted({c.burst for c in done if c.burst is not None})
    groups: list[tuple[float, list[Completed]]] = []
    if bursts:
        for burst in bursts:
            members = [c for c in done if c.burst == burst]
            span = max(c.done_s for c in members) - min(c.sent_s for c in members)
            groups.append((span, members))
    else:
        first = min(c.sent_s for c in done)
        total = max(c.done_s for c in done) - first
        count = measure.stable_windows if total > 0 else 1  # every request in a judged window
        width = total / count
        for index in range(count):
            low, high = first + index * width, first + (index + 1) * width
            last = index == count - 1
            members = [c for c in done if low <= c.done_s < high or (last and c.done_s == high)]
            groups.append((width, members))
    return [
        (
            len(members) / span if span > 0 else 0.0,
            sum(c.latency_ms for c in members) / len(members) if members else float("nan"),
        )
        for span, members in groups
    ]


def _spread(values: list[float]) -> float:
    """Largest relative distance from the mean (perf_analyzer: each within tolerance of avg)."""
    mean = sum(values) / len(values)
    if not mean or mean != mean:
        return float("inf")
    return max(abs(v - mean) for v in values) / mean


def stability(done: Sequence[Completed], measure: MeasureSettings) -> Verdict:
    """The verdict and a sentence saying which windows were compared and how far apart."""
    if not done:
        return Verdict(False, "unstable: no request completed")
    windows = _windows(done, measure)
    needed = measure.stable_windows
    if len(windows) < needed:
        return Verdict(
            False, f"unstable: only {len(windows)} window(s), {needed} needed to judge stability"
        )
    last = windows[-needed:]
    rate, latency = _spread([w[0] for w in last]), _spread([w[1] for w in last])
    tolerance = measure.stability_tolerance
    stable = rate <= tolerance and latency <= tolerance
    spread = f"throughput ±{100 * rate:.1f}%, mean latency ±{100 * latency:.1f}%"
    agree = "agree within" if stable else "differ by more than"
    word = "stable" if stable else "unstable"
    return Verdict(
        stable, f"{word}: the last {needed} windows {agree} {100 * tolerance:.0f}% ({spread})"
    )
