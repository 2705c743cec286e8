"""The regression check's statistics and profile diff, as pure functions of known inputs: a
planted change judged, and no verdict from too few samples (min_samples)."""

from __future__ import annotations

import numpy as np
import pytest

from backend.engine.profile import NodeProfile, Profile
from backend.reporting import regression as stats


def _samples(median: float, count: int = 400, seed: int = 0) -> np.ndarray:
    """Latency-like samples: a floor near the median with a right tail."""
    rng = np.random.default_rng(seed)
    return median * (1 + np.abs(rng.normal(0, 0.02, count)))


def test_a_fifth_slower_is_slower_with_the_ratio_inside_a_tight_interval() -> None:
    a, b = _samples(1.0, seed=1), _samples(1.2, seed=2)
    interval = stats.bootstrap_ratio(a, b, resamples=2000, confidence=0.95, seed=7)
    assert interval.ratio == pytest.approx(np.median(b) / np.median(a))
    assert 1.15 < interval.low <= interval.ratio <= interval.high < 1.25
    assert (interval.samples_a, interval.samples_b, interval.resamples) == (400, 400, 2000)
    assert stats.verdict(interval) == stats.SLOWER
    line = stats.verdict_line(interval, stats.SLOWER, "default", "ort-1.31")
    assert line.startswith("ort-1.31 is slower than default: ")
    assert f"[{interval.low:.3f}, {interval.high:.3f}]" in line


def test_the_mirror_image_is_faster_and_the_same_samples_twice_are_the_same() -> None:
    a, b = _samples(1.0, seed=1), _samples(0.8, seed=2)
    assert stats.verdict(stats.bootstrap_ratio(a, b)) == stats.FASTER
    same = stats.bootstrap_ratio(a, _samples(1.0, seed=3))
    assert same.low < 1.0 < same.high
    assert stats.verdict(same) == stats.SAME


def test_the_bootstrap_is_seeded() -> None:
    a, b = _samples(1.0, seed=1), _samples(1.01, seed=2)
    assert stats.bootstrap_ratio(a, b, seed=5) == stats.bootstrap_ratio(a, b, seed=5)
    assert stats.bootstrap_ratio(a, b, seed=5) != stats.bootstrap_ratio(a, b, seed=6)


@pytest.mark.parametrize(
    ("ratio", "low", "high", "expected"),
    [
        (1.03, 1.01, 1.05, stats.SAME),  # significant, but under the 5% smallest change
        (1.06, 1.01, 1.10, stats.SLOWER),
        (1.20, 0.99, 1.40, stats.SAME),  # large, but the interval holds 1
        (0.90, 0.85, 0.95, stats.FASTER),
        (0.97, 0.95, 0.99, stats.SAME),
    ],
)
def test_the_verdict_needs_a_significant_and_material_change(
    ratio: float, low: float, high: float, expected: str
) -> None:
    interval = stats.RatioInterval(ratio, low, high, 0.95, 2000, 10, 10, 1.0, ratio)
    assert stats.verdict(interval, min_change=0.05) == expected


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_min_samples_is_the_fewest_whose_min_to_max_covers_the_median(confidence: float) -> None:
    """[min, max] of n samples misses the median with probability 2 * 0.5**n."""
    need = stats.min_samples(confidence)
    assert 1 - 2 * 0.5**need >= confidence > 1 - 2 * 0.5 ** (need - 1)


def test_min_samples_at_95_percent_is_six() -> None:
    assert stats.min_samples(0.95) == stats.min_samples() == 6


def test_one_sample_a_side_gives_a_zero_width_interval_and_no_verdict() -> None:
    """The CI shape: B/A 0.948 with the interval [0.948, 0.948] was read as faster."""
    interval = stats.bootstrap_ratio([1.0], [0.948])
    assert interval.low == interval.high == pytest.approx(0.948)
    assert stats.verdict(interval) == stats.TOO_FEW
    line = stats.verdict_line(interval, stats.TOO_FEW, "default", "default")
    assert line == (
        "default against default: too few samples to judge: 1 from A and 1 from B, and a 95% "
        "interval of a median needs at least 6 on each side; measure longer (a larger time cap, "
        "--max-seconds)"
    )
    assert "same" not in line and "faster" not in line


@pytest.mark.parametrize(("count_a", "count_b"), [(400, 1), (1, 400), (5, 400), (400, 5), (5, 5)])
def test_too_few_on_either_side_is_no_verdict_however_large_the_change(
    count_a: int, count_b: int
) -> None:
    a, b = _samples(1.0, count=count_a, seed=1), _samples(1.2, count=count_b, seed=2)
    interval = stats.bootstrap_ratio(a, b)
    assert interval.ratio > 1.15 and interval.low > 1.0  # the interval alone would say slower
    assert stats.verdict(interval) == stats.TOO_FEW
    assert stats.verdict(stats.bootstrap_ratio(b, a)) == stats.TOO_FEW  # nor faster


@pytest.mark.parametrize("count", [6, 40])
def test_a_planted_fifth_slower_with_enough_samples_is_still_slower(count: int) -> None:
    a, b = _samples(1.0, count=count, seed=1), _samples(1.2, count=count, seed=2)
    slower = stats.bootstrap_ratio(a, b)
    assert (slower.samples_a, slower.samples_b) == (count, count)
    assert stats.verdict(slower) == stats.SLOWER
    assert stats.verdict(stats.bootstrap_ratio(b, a)) == stats.FASTER
    same = stats.bootstrap_ratio(a, _samples(1.0, count=count, seed=3))
    assert stats.verdict(same) == stats.SAME


def test_the_minimum_follows_the_confidence() -> None:
    """8 samples a side are enough at 95% and too few at 99.9% (which needs 11)."""
    a, b = _samples(1.0, count=8, seed=1), _samples(1.2, count=8, seed=2)
    assert stats.verdict(stats.bootstrap_ratio(a, b, confidence=0.95)) == stats.SLOWER
    assert stats.verdict(stats.bootstrap_ratio(a, b, confidence=0.999)) == stats.TOO_FEW


def _profile(**per_op_us: float) -> Profile:
    nodes = [
        NodeProfile(
            name=f"{op}_0", op_type=op, provider="CPUExecutionProvider", calls=10, total_us=us * 10
        )
        for op, us in per_op_us.items()
    ]
    return Profile(runs=10, provider="CPUExecutionProvider", nodes=nodes)


def test_the_profile_diff_names_the_op_that_changed_most_and_new_or_vanished_kernels() -> None:
    a = _profile(Conv=100.0, Relu=5.0, FusedConv=20.0)
    b = _profile(Conv=102.0, Relu=5.0, MatMul=900.0)
    diff = stats.profile_diff(a, b)
    assert diff.changes[0].op == "MatMul" and diff.changes[0].status == "new"
    assert diff.changes[0].delta_us == pytest.approx(900.0)
    assert diff.new_kernels == ["MatMul"] and diff.vanished_kernels == ["FusedConv"]
    lines = diff.lines()
    assert lines[0] == "MatMul: 0.0 -> 900.0 us per run (+900.0 us, new)"
    assert "only in B: MatMul" in lines and "only in A: FusedConv" in lines
    stored = stats.diff_to_dict(diff)
    assert stored["changes"][1]["op"] == "FusedConv" and stored["total_b_us"] == 1007.0


@pytest.mark.parametrize("count", [41, 40])  # odd and even: one middle value, or two
def test_the_exact_bootstrap_median_matches_resampling_indices(count: int) -> None:
    samples = _samples(1.0, count=count, seed=4) ** 3  # skewed, with ties in no place
    rng = np.random.default_rng(0)
    exact = stats.bootstrap_medians(samples, 20_000, rng)
    drawn = np.median(samples[rng.integers(0, count, (20_000, count))], axis=1)
    quantiles = [2.5, 25, 50, 75, 97.5]
    spread = np.percentile(drawn, 97.5) - np.percentile(drawn, 2.5)
    difference = np.abs(np.percentile(exact, quantiles) - np.percentile(drawn, quantiles))
    assert (difference < 0.05 * spread).all(), (difference, spread)
