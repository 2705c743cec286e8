"""The measurement loop: warm-up, then timed windows until the last ones agree."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from backend.energy import EnergyMeter, EnergyReport, Reading, energy_report
from backend.measure_settings import PEAK_SCOPE, PEAK_SCOPE_FALLBACK  # re-exported
from backend.specs import MeasureSettings


@dataclass
class Measurement:
    """Raw samples of the windows that count, and how the loop got there."""

    first_inference_ms: float
    samples_ms: list[float]
    window_p50_ms: list[float] = field(default_factory=list)
    stable: bool = False
    seconds: float = 0.0
    stop_reason: str = ""
    # the kept windows' energy (counter deltas) and calls, where an energy meter measured them
    window_energy: list[Reading] = field(default_factory=list)
    window_calls: list[int] = field(default_factory=list)

    def energy(self, meter: EnergyMeter, idle: Reading | None, items_per_call: int) -> EnergyReport:
        """J per item of the kept windows (what the meter read), the idle baseline apart."""
        calls = self.window_calls[-len(self.window_energy) :] if self.window_energy else []
        windows = [(r, n * items_per_call) for r, n in zip(self.window_energy, calls, strict=True)]
        return energy_report(meter, windows, idle)


# The kept calls' mean over their median above which the run is not stable: more time went to
# stalls (calls far slower than the typical one) than to typical calls, so the throughput (from
# the mean) and the percentiles describe different runs. Window medians alone cannot see this.
STALL_RATIO = 2.0


def _stalled_though_agreed(stalled: str, settings: MeasureSettings) -> str:
    """What made it unstable first, then what agreed: "Unstable: 2 windows' medians within
    25% ..." opened the verdict on the agreement."""
    return (
        f"{stalled}, though the {settings.stable_windows} windows' medians were within "
        f"{settings.stability_tolerance:.0%} of their mean"
    )


def stall_reason(samples_ms: np.ndarray) -> str:
    """Why the kept calls are dominated by stalls, with the numbers; '' when they are not."""
    mean, median = float(samples_ms.mean()), float(np.median(samples_ms))
    if median <= 0 or mean <= STALL_RATIO * median:
        return ""
    return (
        f"calls stalled: the mean call ({mean:.3f} ms) took {mean / median:.1f}x the median "
        f"({median:.3f} ms), the slowest {float(samples_ms.max()):.1f} ms"
    )


def windows_agree(values: list[float], tolerance: float) -> bool:
    """True when every value lies within tolerance of the mean of the values."""
    mean = sum(values) / len(values)
    return mean > 0 and all(abs(v - mean) <= tolerance * mean for v in values)


def timed_window(
    infer: Callable[[], object], settings: MeasureSettings, deadline: float
) -> np.ndarray:
    """One window: at least window_runs calls and window_min_seconds, each timed with
    perf_counter_ns, cut short at the deadline (perf_counter); milliseconds per call."""
    clock = time.perf_counter_ns
    window: list[int] = []
    window_start = clock()
    min_window_ns = settings.window_min_seconds * 1e9
    while len(window) < settings.window_runs or clock() - window_start < min_window_ns:
        t0 = clock()
        infer()
        window.append(clock() - t0)
        if time.perf_counter() > deadline:
            break
    return np.asarray(window, dtype=np.float64) / 1e6


def measure(
    infer: Callable[[], object], settings: MeasureSettings, meter: EnergyMeter | None = None
) -> Measurement:
    """Time infer() per call with perf_counter_ns; only the stable windows' samples are kept.

    The first call is timed apart (lazy allocation, kernel selection), then warm-up runs are
    discarded. Each window runs at least window_runs calls and window_min_seconds; measurement
    stops when the last `stable_windows` window medians agree within the tolerance, or at the
    time cap, in which case the result says it is not stable; so does a run whose kept calls
    stalled (STALL_RATIO), whatever their medians did. A measurable energy meter reads
    its counters at each window's edges, so the kept windows carry their joules too.
    """
    clock = time.perf_counter_ns
    start = clock()
    infer()
    first_ms = (clock() - start) / 1e6
    for _ in range(settings.warmup_runs):
        infer()

    loop_start = time.perf_counter()
    deadline = loop_start + settings.max_seconds
    windows: list[np.ndarray] = []
    energy: list[Reading] = []
    medians: list[float] = []
    stable = False
    reason = "time cap reached before windows agreed"
    track = meter.track if meter is not None and meter.measurable else None
    while True:
        with track() if track else nullcontext(Reading()) as reading:
            samples = timed_window(infer, settings, deadline)
        windows.append(samples)
        energy.append(reading)
        medians.append(float(np.median(samples)))
        recent = medians[-settings.stable_windows :]
        if len(recent) == settings.stable_windows and windows_agree(
            recent, settings.stability_tolerance
        ):
            stable = True
            reason = (
                f"{settings.stable_windows} windows' medians within "
                f"{settings.stability_tolerance:.0%} of their mean"
            )
            break
        if time.perf_counter() > deadline:
            break
    keep = -settings.stable_windows
    kept = np.concatenate(windows[keep:])
    if stable and (stalled := stall_reason(kept)):
        stable, reason = False, _stalled_though_agreed(stalled, settings)
    return Measurement(
        first_inference_ms=first_ms,
        samples_ms=kept.tolist(),
        window_p50_ms=medians,
        stable=stable,
        seconds=time.perf_counter() - loop_start,
        stop_reason=reason,
        window_energy=energy[keep:] if track else [],
        window_calls=[len(w) for w in windows[keep:]],
    )


class PeakRss:
    """Peak resident memory over a scope: resets the kernel's high-water mark, then reads it.

    Linux resets VmHWM to the current RSS when "5" is written to /proc/self/clear_refs, so the
    peak read at the end belongs to what ran in between (session creation and the timed loop),
    not to calibration or the FP32 reference session. Where that file cannot be written (not
    Linux, or a restricted /proc), the fallback is getrusage's lifetime peak, and `scope` says so.
    """

    def __init__(self, proc: Path = Path("/proc/self")) -> None:
        self.proc = proc
        self.scope = PEAK_SCOPE
        self.peak_mb: float | None = None

    def start(self) -> PeakRss:
        """Begin the scope: the high-water mark drops to the memory in use right now."""
        try:
            (self.proc / "clear_refs").write_text("5")
        except OSError:
            self.scope = PEAK_SCOPE_FALLBACK
        return self

    def stop(self) -> float:
        """End the scope and keep its peak in MB."""
        self.peak_mb = self._read_mb()
        return self.peak_mb

    def __enter__(self) -> PeakRss:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _read_mb(self) -> float:
        if self.scope == PEAK_SCOPE:
            try:
                for line in (self.proc / "status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024  # kB
            except OSError:
                pass
            self.scope = PEAK_SCOPE_FALLBACK
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
