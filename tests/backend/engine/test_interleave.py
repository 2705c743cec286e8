"""Interleaved timing for real (windows of a 1 ms sleep, timed by timed_window against the
deadline): every candidate keeps the same rounds, the round the time cap cut short is dropped
for all of them unless it is the only one, and min_rounds still holds."""

from __future__ import annotations

import time

from backend.engine.interleave import Interleaved, Window, interleaved_windows
from backend.engine.measure import timed_window
from backend.specs import MeasureSettings

RUNS = 20  # calls a full window asks for (no minimum time: the count decides)


def _sleep() -> None:
    time.sleep(0.001)


def _window(settings: MeasureSettings) -> Window:
    def call(deadline: float) -> list[float]:
        return timed_window(_sleep, settings, deadline).tolist()

    return call


def _settings(max_seconds: float) -> MeasureSettings:
    return MeasureSettings(
        warmup_runs=0, window_runs=RUNS, window_min_seconds=0.0, max_seconds=max_seconds
    )


def test_the_round_the_time_cap_cut_short_is_dropped_for_every_side() -> None:
    """Never settled (min_rounds out of reach), so the time cap ends the loop inside a round:
    one side's window or the other's is cut there, and that round goes for both."""
    settings = _settings(max_seconds=0.4)
    timing = interleaved_windows(
        {"a": _window(settings), "b": _window(settings)},
        settings,
        min_rounds=10_000,
        keep_all=True,
    )
    assert timing.dropped == 1 and timing.rounds >= 2, timing.rounds
    for name in ("a", "b"):
        timed = timing.timed[name]
        assert len(timed.window_p50_ms) == timing.rounds, name
        assert len(timed.samples_ms) == RUNS * timing.rounds, (name, len(timed.samples_ms))
    assert "a last one cut short by the time cap dropped on every side" in timing.verdict()


def test_a_only_round_cut_short_is_kept_and_b_has_its_single_call() -> None:
    """A cap far shorter than one window: A's window runs to the deadline, then B's begins
    after it and times one call; the only round is kept (the verdict then says too few)."""
    settings = _settings(max_seconds=0.001)
    timing = interleaved_windows(
        {"a": _window(settings), "b": _window(settings)}, settings, min_rounds=10, keep_all=True
    )
    assert (timing.rounds, timing.dropped) == (1, 0)
    assert 1 <= len(timing.timed["a"].samples_ms) < RUNS
    assert len(timing.timed["b"].samples_ms) == 1


def test_min_rounds_still_holds_and_a_settled_loop_drops_nothing() -> None:
    settings = _settings(max_seconds=30)
    windows = {name: _window(settings) for name in ("a", "b")}
    timing = interleaved_windows(windows, settings, min_rounds=4, keep_all=True)
    assert timing.rounds >= 4 and timing.dropped == 0
    assert timing.stable  # a steady sleep settles long before the cap
    for timed in timing.timed.values():
        assert len(timed.samples_ms) == RUNS * timing.rounds


def test_loops_of_several_processes_join_in_order_and_say_so() -> None:
    """A regression check times each pair of processes in its own loop; joined, every loop's
    samples and windows follow one another, rounds and dropped rounds add up, and a candidate
    is stable only where every loop was."""
    settings = _settings(max_seconds=30)
    loops = [
        interleaved_windows(
            {name: _window(settings) for name in ("a", "b")}, settings, min_rounds=2, keep_all=True
        )
        for _ in range(2)
    ]
    loops[1].timed["b"].stable = False
    joined = Interleaved.joined(loops)
    assert joined.processes == 2 and joined.rounds == loops[0].rounds + loops[1].rounds
    for name in ("a", "b"):
        assert joined.timed[name].samples_ms == (
            loops[0].timed[name].samples_ms + loops[1].timed[name].samples_ms
        )
        assert len(joined.timed[name].window_p50_ms) == joined.rounds
    assert joined.timed["a"].stable and not joined.timed["b"].stable and not joined.stable
    said = joined.verdict()
    assert "(2 candidates, each in 2 processes one after another)" in said, said
    assert "unstable: the last 3 window medians of b did not agree" in said, said
    assert "s per candidate and process; treat the verdict with care" in said, said
    assert Interleaved.from_dict(joined.to_dict(), settings).processes == 2
