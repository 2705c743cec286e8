"""The timed windows of one generation point: whole generations, as sweeps time calls.

The first generation is timed apart, then warm-up, then windows until the last windows' median
end-to-end latencies agree (measure.windows_agree) or the time cap; an energy meter that can
measure reads its counters at each window's edges (backend/energy).
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import numpy as np

from backend import energy
from backend.engine.measure import PeakRss, timed_window, windows_agree
from backend.measure_settings import MeasureSettings
from backend.runtimes import GenAISession, TokenTimes


def measure_point(
    session: GenAISession,
    prompts: np.ndarray,
    new_tokens: int,
    settings: MeasureSettings,
    meter: energy.EnergyMeter | None = None,
) -> tuple[list[TokenTimes], float, bool, str, float, list[tuple[energy.Reading, int]]]:
    """(kept runs, first run ms, stable, stop reason, peak RSS MB, the kept windows' energy and
    generated tokens): the first generation timed apart, warm-up, then windows of whole
    generations until the last windows' median end-to-end latencies agree
    (measure.windows_agree), or the time cap. A measurable meter reads each window's edges."""
    runs: list[TokenTimes] = []
    track = meter.track if meter is not None and meter.measurable else None
    readings: list[energy.Reading] = []

    def once() -> None:
        runs.append(session.generate(prompts, new_tokens))

    with PeakRss() as rss:
        once()
        first_ms = runs[0].total_ms
        for _ in range(settings.warmup_runs):
            once()
        deadline = time.perf_counter() + settings.max_seconds
        windows: list[list[TokenTimes]] = []
        medians: list[float] = []
        stable, reason = False, "time cap reached before windows agreed"
        while True:
            before = len(runs)
            with track() if track else nullcontext(energy.Reading()) as reading:
                samples = timed_window(once, settings, deadline)
            readings.append(reading)
            windows.append(runs[before:])
            medians.append(float(np.median(samples)))
            recent = medians[-settings.stable_windows :]
            if len(recent) == settings.stable_windows and windows_agree(
                recent, settings.stability_tolerance
            ):
                stable = True
                reason = (
                    f"{settings.stable_windows} windows within {settings.stability_tolerance:.0%}"
                )
                break
            if time.perf_counter() > deadline:
                break
    keep = -settings.stable_windows
    kept = [run for window in windows[keep:] for run in window]
    tokens = prompts.shape[0] * new_tokens  # every sequence generates exactly new_tokens
    spent = list(zip(readings[keep:], [len(w) * tokens for w in windows[keep:]], strict=True))
    return kept, first_ms, stable, reason, rss.peak_mb or 0.0, spent if track else []
