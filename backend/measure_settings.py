"""How long and how carefully to measure, and the named presets the CLI and pages share."""

from __future__ import annotations

from dataclasses import dataclass

from backend.errors import UserError

# A sweep's wrong-outputs bound unless the user sets one: a sanity bound, well below the 0.99
# where the why lines start warning about INT8 loss, so a lossy INT8 point stays a trade-off on
# the Pareto chart while garbage (cosine near 0, as CUDA-graph rows gave) is never "ok".
DEFAULT_MIN_COSINE = 0.9

# What a result's peak memory covers (backend.engine.measure.PeakRss), declared here, apart from
# the numpy-heavy measuring loop, because the report tables (and the CLI's parser) name it.
PEAK_SCOPE = "session + timed loop"
PEAK_SCOPE_FALLBACK = "whole process (this kernel cannot reset the peak)"


@dataclass(frozen=True)
class MeasureSettings:
    """How long and how carefully to measure; defaults follow perf_analyzer (3 windows, 10%)."""

    warmup_runs: int = 10
    window_runs: int = 50
    window_min_seconds: float = 0.5
    stable_windows: int = 3
    stability_tolerance: float = 0.10
    max_seconds: float = 30.0
    accuracy_samples: int = 4

    def __post_init__(self) -> None:
        if self.warmup_runs < 0:
            raise UserError("Warm-up runs cannot be negative; use 0 or more.")
        if self.window_runs < 1:
            raise UserError("A measurement window needs at least one run.")
        if self.stable_windows < 1:
            raise UserError("Stability needs at least one window.")
        if not 0 < self.stability_tolerance < 1:
            raise UserError("Stability tolerance must be between 0 and 1 (0.10 means 10%).")
        if self.max_seconds <= 0:
            raise UserError("The time cap per configuration must be positive.")


MEASURE_PRESETS: dict[str, MeasureSettings] = {
    "quick": MeasureSettings(
        warmup_runs=3,
        window_runs=20,
        window_min_seconds=0.1,
        stable_windows=2,
        stability_tolerance=0.25,
        max_seconds=5.0,
        accuracy_samples=2,
    ),
    "standard": MeasureSettings(),
    "thorough": MeasureSettings(
        warmup_runs=50,
        window_runs=100,
        window_min_seconds=1.0,
        stable_windows=5,
        stability_tolerance=0.05,
        max_seconds=120.0,
        accuracy_samples=16,
    ),
}


def preset_name(settings: MeasureSettings) -> str | None:
    """The preset these settings equal, or None for custom settings."""
    return next((name for name, preset in MEASURE_PRESETS.items() if preset == settings), None)
