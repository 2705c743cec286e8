import time

import numpy as np

from backend.engine.measure import measure
from backend.results import LatencyStats
from backend.specs import MeasureSettings


def test_steady_workload_stops_once_three_windows_agree() -> None:
    calls = []
    settings = MeasureSettings(
        warmup_runs=5, window_runs=20, window_min_seconds=0.0, max_seconds=10
    )

    def work() -> None:
        calls.append(1)
        time.sleep(0.001)

    m = measure(work, settings)
    assert m.stable and m.stop_reason.startswith("3 windows")
    assert len(m.window_p50_ms) == 3  # a steady sleep agrees at once
    assert len(m.samples_ms) == 3 * 20
    assert len(calls) == 1 + 5 + 60  # first call and warm-up are not in the samples
    assert all(s >= 1.0 for s in m.samples_ms)


def test_drifting_workload_is_reported_unstable_at_the_time_cap() -> None:
    delay = [0.0005]

    def slower_each_call() -> None:
        time.sleep(delay[0])
        delay[0] *= 1.08

    settings = MeasureSettings(
        warmup_runs=0, window_runs=5, window_min_seconds=0.0, max_seconds=0.4
    )
    m = measure(slower_each_call, settings)
    assert not m.stable and "time cap" in m.stop_reason
    assert m.window_p50_ms == sorted(m.window_p50_ms)


def test_first_inference_is_timed_apart_from_the_steady_state() -> None:
    state = {"first": True}

    def cold_then_warm() -> None:
        if state["first"]:
            state["first"] = False
            time.sleep(0.05)

    m = measure(
        cold_then_warm, MeasureSettings(warmup_runs=1, window_runs=10, window_min_seconds=0.0)
    )
    assert m.first_inference_ms >= 50
    assert max(m.samples_ms) < 50


def test_latency_stats_match_numpy_percentiles() -> None:
    samples = np.arange(1, 101, dtype=float)
    stats = LatencyStats.from_samples(samples)
    assert (stats.min, stats.max, stats.count) == (1.0, 100.0, 100)
    assert stats.p50 == np.percentile(samples, 50) and stats.p99 == np.percentile(samples, 99)
    assert abs(stats.std - samples.std(ddof=1)) < 1e-12
