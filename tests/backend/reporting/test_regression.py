"""The regression check's statistics and profile diff, as pure functions of known inputs: a
planted change judged, no verdict from too few samples (min_samples), and the two-level
bootstrap over processes (process_ratio): an offset between processes is no change, a slowdown
every process shows still is."""

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
        (1.20, 0.99, 1.40, stats.UNCLEAR),  # large, but the interval holds 1: not 'same'
        (1.00, 0.57, 1.89, stats.UNCLEAR),  # a busy host's A/A: the interval says nothing
        (1.04, 1.02, 1.07, stats.UNCLEAR),  # under 5%, but 7% is not ruled out
        (0.90, 0.85, 0.95, stats.FASTER),
        (0.97, 0.95, 0.99, stats.SAME),
        (1.00, 0.98, 1.02, stats.SAME),
    ],
)
def test_the_verdict_needs_a_significant_and_material_change(
    ratio: float, low: float, high: float, expected: str
) -> None:
    interval = stats.RatioInterval(ratio, low, high, 0.95, 2000, 10, 10, 1.0, ratio)
    assert stats.verdict(interval, min_change=0.05) == expected


def test_an_unclear_verdict_says_why_and_what_to_do() -> None:
    interval = stats.RatioInterval(1.0, 0.57, 1.89, 0.95, 2000, 1200, 1100, 0.38, 0.38)
    line = stats.verdict_line(interval, stats.verdict(interval), "default", "default")
    assert line.startswith("default against default is unclear: median 0.38 ms against 0.38 ms")
    assert line.endswith(
        "; the interval reaches past the 5% smallest change, so neither the same nor a change "
        "can be said: measure in more processes (--processes) or on a quieter host"
    ), line


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


def _process(median: float, seed: int, count: int = 2000) -> np.ndarray:
    """One process's calls: tight (0.2% spread) around its own median."""
    rng = np.random.default_rng(seed)
    return median * (1 + np.abs(rng.normal(0, 0.002, count)))


def test_processes_four_percent_apart_give_an_interval_that_holds_one() -> None:
    """The CI shape: each process of one version lands a few percent from the others. One
    process a side, the per-call interval is tight and excludes 1 (a 3% 'change' with no
    smallest change to stop it); two pairs whose B/A disagree (1.03, 0.95), drawing pairs widens
    it past 1: same, even with no smallest change at all."""
    a = [_process(1.00, seed=1), _process(1.04, seed=2)]
    b = [_process(1.03, seed=3), _process(0.99, seed=4)]
    first_pair = stats.bootstrap_ratio(a[0], b[0])
    assert first_pair.low > 1.0 and stats.verdict(first_pair, min_change=0) == stats.SLOWER

    interval = stats.process_ratio(a, b, asked=2)
    assert interval.low < 1.0 < interval.high, interval
    per_a, per_b = ([float(np.median(r)) for r in side] for side in (a, b))
    pairs = [pb / pa for pa, pb in zip(per_a, per_b, strict=True)]
    assert interval.ratio == pytest.approx(np.median(pairs))  # the median of the pairs' B/A
    assert stats.verdict(interval) == stats.SAME  # within 5% of 1 on both ends
    assert stats.verdict(interval, min_change=0) == stats.UNCLEAR  # holds 1, yet not a point
    assert interval.processes() == (2, 2) and interval.fewest() == (2000, 2000)
    assert interval.process_medians_a_ms == pytest.approx((1.00, 1.04), rel=5e-3)
    assert (interval.samples_a, interval.samples_b) == (4000, 4000)
    line = stats.verdict_line(interval, stats.SAME, "default", "default")
    medians = ", ".join(f"{np.median(r):.4g}" for r in a)
    assert f"; A in 2 processes: {medians} ms (4.0% apart); B in 2 processes: " in line, line


def test_drift_that_lands_on_both_processes_of_a_pair_cancels() -> None:
    """The host slowed everything by 10% during the second pair: A_2 and B_2 moved together, so
    an A/A check stays tight around 1 and a 6% slowdown in both pairs is still found."""
    a = [_process(1.00, seed=1), _process(1.10, seed=2)]
    same = stats.process_ratio(a, [_process(1.00, seed=3), _process(1.10, seed=4)], asked=2)
    assert 0.99 < same.low <= same.high < 1.01 and stats.verdict(same) == stats.SAME, same
    slower = stats.process_ratio(a, [_process(1.06, seed=3), _process(1.166, seed=4)], asked=2)
    assert 1.05 < slower.low and stats.verdict(slower) == stats.SLOWER, slower
    apart = stats.process_ratio(a, [_process(1.06, seed=3)] * 3, asked=2)  # never written
    assert apart.ratio == pytest.approx(1.06 / np.median([1.0, 1.10]), rel=1e-2)


def test_a_fifth_slower_in_every_process_is_still_slower() -> None:
    a = [_process(1.00, seed=1), _process(1.04, seed=2)]
    b = [_process(1.20, seed=3), _process(1.25, seed=4)]
    interval = stats.process_ratio(a, b, asked=2)
    assert 1.1 < interval.low <= interval.ratio <= interval.high < 1.3, interval
    assert stats.verdict(interval) == stats.SLOWER
    assert stats.verdict(stats.process_ratio(b, a, asked=2)) == stats.FASTER


def test_one_process_a_side_is_the_per_call_bootstrap_and_both_are_seeded() -> None:
    """A check stored before processes reads back with the numbers it always had."""
    a, b = _samples(1.0, seed=1), _samples(1.01, seed=2)
    one = stats.process_ratio([a], [b], seed=5)
    assert one == stats.bootstrap_ratio(a, b, seed=5)
    assert one.process_counts_a == (400,) and stats.processes_said(one).startswith("one process")
    runs = [_process(1.0, seed=1), _process(1.03, seed=2)], [_process(1.0, seed=3)] * 2
    assert stats.process_ratio(*runs, seed=5) == stats.process_ratio(*runs, seed=5)
    assert stats.process_ratio(*runs, seed=5) != stats.process_ratio(*runs, seed=6)


def test_too_few_calls_in_one_process_or_too_few_processes_is_no_verdict() -> None:
    """Each process needs min_samples calls however many the others have; a side in one
    process where two or more were asked cannot show an offset, so it gets no verdict."""
    a = [_process(1.0, seed=1), _process(1.0, seed=2, count=5)]
    b = [_process(1.3, seed=3), _process(1.3, seed=4)]
    short = stats.process_ratio(a, b, asked=2)
    assert short.samples_a == 2005 and short.fewest() == (5, 2000)
    assert stats.verdict(short) == stats.TOO_FEW
    assert stats.too_few_sentence(short) == (
        "too few samples to judge: 5 from A and 2000 from B in the fewest of their 2 processes, "
        "and a 95% interval of a median needs at least 6 in each process; measure longer (a "
        "larger time cap, --max-seconds)"
    )
    alone = stats.process_ratio([a[0]], [b[0]], asked=2)
    assert stats.verdict(alone) == stats.TOO_FEW
    assert stats.too_few_sentence(alone).startswith(
        "too few processes to judge: A was measured in 1 and B in 1, and an interval that "
        "covers the offset between processes needs at least 2 on each side"
    )
    assert stats.verdict(stats.process_ratio([a[0]], [b[0]], asked=1)) == stats.SLOWER


def test_stored_samples_are_cut_back_into_processes_by_their_counts() -> None:
    samples = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert stats.by_process(samples, [2, 3]) == [[1.0, 2.0], [3.0, 4.0, 5.0]]
    assert stats.by_process(samples, None) == [samples]  # stored before processes
    assert stats.by_process(samples, [2, 2]) == [samples]  # counts that do not add up


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


def test_an_op_that_took_the_same_time_on_both_sides_is_unchanged() -> None:
    assert stats.OpChange("Gemm", 4.0, 4.0).status == "unchanged"
    assert stats.OpChange("Gemm", 4.0, 5.0).status == "changed"
    assert stats.OpChange("MatMul", 0.0, 5.0).status == "new"
