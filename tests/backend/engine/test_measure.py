import resource
import time
from pathlib import Path

import numpy as np
import pytest

from backend.engine.measure import PEAK_SCOPE, PEAK_SCOPE_FALLBACK, PeakRss, measure
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
    assert m.stable and m.stop_reason.startswith("3 windows' medians within 10% of their mean")
    assert len(m.window_p50_ms) == 3  # a steady sleep agrees at once
    assert len(m.samples_ms) == 3 * 20
    assert len(calls) == 1 + 5 + 60  # first call and warm-up are not in the samples
    assert all(s >= 1.0 for s in m.samples_ms)


def test_drifting_workload_is_reported_unstable_at_the_time_cap() -> None:
    # twice as slow from one window to the next: far more than a busy host's sleep jitter (CI
    # once saw a 0.5 ms sleep's first window read slower than its second)
    delay = [0.002]

    def slower_each_call() -> None:
        time.sleep(delay[0])
        delay[0] *= 1.15

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


def test_latency_stats_are_linear_interpolation_percentiles_worked_by_hand() -> None:
    # 1..100 ms: percentile q sits at index q/100 * 99, between two neighbouring samples
    stats = LatencyStats.from_samples(np.arange(1, 101, dtype=float)[::-1])
    assert (stats.min, stats.max, stats.count, stats.mean) == (1.0, 100.0, 100, 50.5)
    assert stats.p50 == pytest.approx(50.5)
    assert stats.p90 == pytest.approx(90.1)
    assert stats.p95 == pytest.approx(95.05)
    assert stats.p99 == pytest.approx(99.01)
    assert stats.std == pytest.approx((100 * 101 / 12) ** 0.5)  # sample std of 1..n
    single = LatencyStats.from_samples([2.0])
    assert (single.p50, single.p99, single.std) == (2.0, 2.0, 0.0)
    with pytest.raises(ValueError):
        LatencyStats.from_samples([])


def _status_kb(field: str) -> int:
    status = Path("/proc/self/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith(field))


def test_peak_rss_counts_only_what_runs_inside_its_scope() -> None:
    before = np.ones(300 * 2**20, dtype=np.uint8)  # 300 MB touched, then freed
    del before
    peak_so_far = _status_kb("VmHWM:") / 1024
    with PeakRss() as outside_scope:
        pass
    assert outside_scope.scope == PEAK_SCOPE
    with PeakRss() as inside_scope:
        during = np.ones(100 * 2**20, dtype=np.uint8)  # 100 MB touched inside the scope
        rss_with_it = _status_kb("VmRSS:") / 1024
        del during
    assert outside_scope.peak_mb < peak_so_far - 200  # the freed 300 MB is not counted
    assert inside_scope.peak_mb >= outside_scope.peak_mb + 90  # the 100 MB inside is counted
    assert inside_scope.peak_mb == pytest.approx(rss_with_it, abs=5)  # the kernel syncs lazily


def test_peak_rss_without_a_resettable_proc_says_it_covers_the_whole_process(
    tmp_path: Path,
) -> None:
    with PeakRss(proc=tmp_path / "no-proc") as peak:
        pass
    assert peak.scope == PEAK_SCOPE_FALLBACK
    assert peak.peak_mb == resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_windows_whose_calls_stall_are_not_stable_though_their_medians_agree() -> None:
    """One call in five stalls 20x: every window's median is the typical call, so medians
    agree, but most of the time goes to stalls and the throughput (from the mean) would say
    another run than the p50 does."""
    calls = [0]

    def stalls_every_fifth_call() -> None:
        calls[0] += 1
        time.sleep(0.02 if calls[0] % 5 == 0 else 0.001)

    settings = MeasureSettings(
        warmup_runs=0,
        window_runs=10,
        window_min_seconds=0.0,
        stable_windows=2,
        stability_tolerance=0.5,
        max_seconds=5,
    )
    m = measure(stalls_every_fifth_call, settings)
    assert not m.stable
    assert m.stop_reason.startswith("calls stalled: the mean call (")
    assert m.stop_reason.endswith(", though the 2 windows' medians were within 50% of their mean")
    assert np.median(m.samples_ms) < 10 and np.mean(m.samples_ms) > 2 * np.median(m.samples_ms)
