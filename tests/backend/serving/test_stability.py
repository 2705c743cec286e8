"""perf_analyzer's stability rule, applied to throughput and latency both."""

from __future__ import annotations

from backend.serving.stability import Completed, stability
from backend.specs import MeasureSettings

SETTINGS = MeasureSettings(window_min_seconds=0.5, stable_windows=3, stability_tolerance=0.10)


def _steady(seconds: float, per_second: int, latency_s: float) -> list[Completed]:
    step = 1 / per_second
    return [Completed(i * step, i * step + latency_s) for i in range(int(seconds * per_second))]


def test_even_windows_are_stable() -> None:
    verdict = stability(_steady(2.0, 100, 0.002), SETTINGS)
    assert verdict.stable and verdict.note.startswith("stable: the last 3 windows agree")


def test_latency_that_doubles_at_the_end_is_unstable_even_at_steady_throughput() -> None:
    done = _steady(2.0, 100, 0.002)
    done = [c if c.sent_s < 1.5 else Completed(c.sent_s, c.sent_s + 0.004) for c in done]
    verdict = stability(done, SETTINGS)
    assert not verdict.stable and "differ by more than 10%" in verdict.note


def test_throughput_that_halves_is_unstable() -> None:
    done = _steady(1.5, 100, 0.002) + [
        Completed(1.5 + i / 50, 1.5 + i / 50 + 0.002) for i in range(25)
    ]
    assert not stability(done, SETTINGS).stable


def test_offline_bursts_are_the_windows() -> None:
    bursts = [Completed(b * 0.1, b * 0.1 + 0.05, burst=b) for b in range(4) for _ in range(8)]
    assert stability(bursts, SETTINGS).stable
    assert "only 2 window" in stability(bursts[:16], SETTINGS).note
