"""perf_analyzer's stability rule, applied to throughput and latency both."""

from __future__ import annotations

from backend.serving.stability import Completed, stability
from backend.specs import MEASURE_PRESETS, MeasureSettings

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


def test_a_slump_before_the_last_windows_is_unstable() -> None:
    """The point's figures cover its whole duration, so its verdict does too: a 5 s `quick` point
    whose throughput fell to a third from 0.2 s to 2.5 s read "stable" when only its last
    2 x 0.1 s were judged."""
    quick = MEASURE_PRESETS["quick"]
    done = (
        _steady(0.2, 1000, 0.001)
        + [Completed(0.2 + i * 0.003, 0.2 + i * 0.003 + 0.001) for i in range(766)]
        + [Completed(2.5 + i / 1000, 2.5 + i / 1000 + 0.001) for i in range(2500)]
    )
    verdict = stability(done, quick)
    assert not verdict.stable, verdict.note
    assert "the last 2 windows differ by more than 25%" in verdict.note


def test_jitter_in_the_last_tenth_of_a_second_does_not_decide() -> None:
    """A steady 5 s point with one slow 0.1 s at its end stays stable: the windows are halves."""
    quick = MEASURE_PRESETS["quick"]
    done = _steady(4.9, 1000, 0.001) + [
        Completed(4.9 + i / 500, 4.9 + i / 500 + 0.002) for i in range(50)
    ]
    assert stability(done, quick).stable
