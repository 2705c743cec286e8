"""The batcher simulation on cases whose batches are known by construction."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from backend.errors import UserError
from backend.serving.costmodel import _lognormal_cv
from backend.serving.ranking import policy_grid, rank_policies
from backend.serving.simulate import replay, simulate
from backend.serving.types import BatchingPolicy, LatencyCurve, LoadSpec, Scenario

LINEAR = LatencyCurve((1, 32), (2.0, 17.5))  # 1.5 + 0.5 * b ms, no jitter, no overhead
FLAT = LatencyCurve((1, 8), (1.0, 1.0))  # 1 ms whatever the batch


def test_with_no_delay_one_saturated_instance_grows_its_batches_to_the_fixed_point() -> None:
    # one request per ms; a batch of b takes 1.5 + 0.5 b ms, so b settles where b = 1.5 + 0.5 b
    log = replay(LINEAR, BatchingPolicy(max_batch_size=32), [float(i) for i in range(20)])
    assert log.batch_sizes == (1, 2, 2, 3, 3, 3, 3, 3)
    assert log.batch_start_ms == (0.0, 2.0, 4.5, 7.0, 10.0, 13.0, 16.0, 19.0)


def test_slow_arrivals_wait_exactly_the_queue_delay_for_a_preferred_size_never_reached() -> None:
    policy = BatchingPolicy(max_batch_size=8, preferred_batch_sizes=(4,), max_queue_delay_us=2000)
    log = replay(FLAT, policy, [3.0 * i for i in range(6)])
    assert log.batch_sizes == (1,) * 6
    assert log.queue_ms == (2.0,) * 6


def test_a_held_batch_leaves_late_by_the_overshoot_and_comes_back_later_by_the_wake() -> None:
    # Triton's batcher sleeps out the delay on a timed wait and wakes up late; the host sat idle
    late = replace(FLAT, delay_overshoot_ms=0.5, held_wake_ms=0.25)
    policy = BatchingPolicy(max_batch_size=8, preferred_batch_sizes=(4,), max_queue_delay_us=2000)
    log = replay(late, policy, [3.0 * i for i in range(6)])
    assert log.queue_ms == (2.5,) * 6
    assert log.batch_done_ms[0] == pytest.approx(2.5 + 1.0 + 0.25)
    # a preferred size reached before the deadline is sent at once, with no idle wake-up
    quick = replay(late, policy, [0.0, 0.1, 0.2, 0.3])
    assert quick.batch_start_ms == (0.3,) and quick.batch_done_ms == (1.3,)
    # without a delay nothing is held: the overshoot never applies
    assert replay(late, BatchingPolicy(max_batch_size=8), [0.0, 3.0]).queue_ms == (0.0, 0.0)
    alone = simulate(late, LoadSpec(Scenario.SINGLE_STREAM), policy, requests=100)
    assert alone.latency.p50 == pytest.approx(2.0 + 0.5 + 1.0 + 0.25)


def test_a_preferred_size_reached_before_the_delay_is_sent_when_its_last_request_arrives() -> None:
    policy = BatchingPolicy(max_batch_size=8, preferred_batch_sizes=(4,), max_queue_delay_us=5000)
    log = replay(FLAT, policy, [float(i) for i in range(12)])
    assert log.batch_sizes == (4, 4, 4)
    assert log.batch_start_ms == (3.0, 7.0, 11.0)


def test_the_largest_preferred_size_available_is_taken_and_max_batch_size_never_passed() -> None:
    everything_at_once = [0.0] * 13
    log = replay(
        FLAT, BatchingPolicy(max_batch_size=8, preferred_batch_sizes=(2, 4)), everything_at_once
    )
    assert log.batch_sizes == (4, 4, 4, 1)
    log = replay(FLAT, BatchingPolicy(max_batch_size=8), everything_at_once)
    assert log.batch_sizes == (8, 5)


def test_without_dynamic_batching_two_instances_run_single_requests_side_by_side() -> None:
    apart = replace(FLAT, instance_slowdown=(1.0, 1.0))  # measured: they do not slow each other
    policy = BatchingPolicy(max_batch_size=8, dynamic_batching=False, instance_count=2)
    log = replay(apart, policy, [0.0] * 4)
    assert log.batch_sizes == (1, 1, 1, 1)
    assert log.batch_start_ms == (0.0, 0.0, 1.0, 1.0)


def test_instances_whose_sharing_was_not_measured_are_predicted_to_add_no_throughput() -> None:
    # a sweep times one session at a time, which already uses every core: nothing says a second
    # instance runs beside it, so the prediction must not double the rate
    assert FLAT.slowdown_at(1) == 1.0 and FLAT.slowdown_at(2) == 2.0 and FLAT.slowdown_at(3) == 3.0
    assert "two instances not measured (taken to add no throughput)" in FLAT.summary
    load = LoadSpec(Scenario.CONCURRENCY, concurrency=8)
    one, two = (
        simulate(FLAT, load, BatchingPolicy(8, dynamic_batching=False, instance_count=n))
        for n in (1, 2)
    )
    assert two.achieved_rps <= one.achieved_rps * 1.05
    apart = replace(FLAT, instance_slowdown=(1.0, 1.0))
    measured = simulate(apart, load, BatchingPolicy(8, dynamic_batching=False, instance_count=2))
    assert measured.achieved_rps > 1.8 * one.achieved_rps  # where measured, it scales


def test_instances_sharing_cores_slow_each_other_by_the_curve_factor() -> None:
    shared = LatencyCurve((1, 8), (1.0, 1.0), instance_slowdown=(1.0, 2.0))
    policy = BatchingPolicy(max_batch_size=8, dynamic_batching=False, instance_count=2)
    log = replay(shared, policy, [0.0, 0.0])
    assert log.batch_done_ms == (1.0, 2.0)  # the second starts while the first runs


def test_single_stream_pays_overhead_plus_compute_and_concurrency_saturates_one_instance() -> None:
    curve = LatencyCurve((1, 8), (2.0, 9.0), overhead_ms=0.5)
    policy = BatchingPolicy(max_batch_size=8, dynamic_batching=False)
    point = simulate(curve, LoadSpec(Scenario.SINGLE_STREAM), policy, requests=200)
    assert point.predicted and point.latency.p50 == pytest.approx(2.5)
    assert point.achieved_rps == pytest.approx(400.0, rel=0.01)
    busy = simulate(curve, LoadSpec(Scenario.CONCURRENCY, concurrency=4), policy, requests=400)
    assert busy.achieved_rps == pytest.approx(500.0, rel=0.02)  # one 2 ms execution at a time
    assert busy.queue_ms > busy.compute_ms


def test_an_overloaded_server_scenario_is_reported_unstable() -> None:
    policy = BatchingPolicy(max_batch_size=8, dynamic_batching=False)
    load = LoadSpec(Scenario.SERVER, target_rps=2000, seed=3)  # 1 ms each: capacity 1000/s
    point = simulate(FLAT, load, policy, requests=1000)
    assert not point.stable and "grows" in point.stability_note
    assert point.achieved_rps == pytest.approx(1000.0, rel=0.05)


def test_requests_larger_than_the_maximum_batch_are_refused_with_a_sentence() -> None:
    load = LoadSpec(Scenario.OFFLINE, requests=10, samples_per_request=16)
    with pytest.raises(UserError, match="exceed max_batch_size 8"):
        simulate(FLAT, load, BatchingPolicy(max_batch_size=8))


def test_ranking_three_hundred_policies_puts_those_meeting_the_bound_first_by_rate() -> None:
    curve = LatencyCurve(
        (1, 4, 16, 32),
        (1.0, 1.4, 3.4, 6.2),
        overhead_ms=0.2,
        compute_jitter=0.05,
        instance_slowdown=(1.0, 1.7),
    )
    grid = policy_grid(
        instance_counts=(1, 2, 3, 4), delays_us=(0, 200, 500, 1000, 2000, 3000, 4000)
    )
    assert len(grid) >= 300
    ranked = rank_policies(curve, LoadSpec(Scenario.SERVER, target_rps=900, seed=1), grid, 6.0)
    assert len(ranked) == len(grid)
    meets = [r.meets_slo for r in ranked]
    assert any(meets) and not all(meets)
    assert meets == sorted(meets, reverse=True)  # every policy meeting the bound comes first
    assert all(r.p99_ms <= 6.0 for r in ranked if r.meets_slo)
    no_batching = next(r for r in ranked if r.policy == grid[0])
    assert not no_batching.meets_slo  # 900/s on one 1 ms instance: the queue grows


def test_the_generators_serial_work_comes_after_the_batch_so_batches_still_form() -> None:
    # 2 ms executions, 0.5 ms of client work per answer: while one batch runs, the client reads
    # the previous answers and sends four new requests, which queue for the next batch
    curve = LatencyCurve((1, 8), (2.0, 2.0), request_cost_ms=0.5)
    load = LoadSpec(Scenario.CONCURRENCY, concurrency=8)
    point = simulate(curve, load, BatchingPolicy(max_batch_size=8))
    assert point.mean_batch == pytest.approx(4.0, abs=0.3)
    assert point.achieved_rps == pytest.approx(2000.0, rel=0.03)  # one read per 0.5 ms
    alone = simulate(curve, LoadSpec(Scenario.SINGLE_STREAM), BatchingPolicy(8), requests=100)
    assert alone.latency.p50 == pytest.approx(2.5)  # compute, then the client's read


def test_each_request_in_a_batch_adds_its_response_work_to_the_execution() -> None:
    curve = LatencyCurve((1, 8), (1.0, 1.0), response_cost_ms=0.25)
    log = replay(curve, BatchingPolicy(max_batch_size=8), [0.0] * 4)
    assert log.batch_sizes == (4,)
    assert log.batch_done_ms == (2.0,)  # 1 ms compute + 4 x 0.25 ms


def test_a_saturated_host_paces_answers_at_its_cores_while_a_lone_request_is_not_slowed() -> None:
    # 1 ms of CPU per request outside executions, 2 cores: at most 2000 answers per second,
    # less the executions' own CPU (1 ms per batch, shared by its requests)
    curve = LatencyCurve((1, 16), (1.0, 1.0), request_cost_ms=0.1, host_cpu_ms=1.0, host_cores=2)
    policy = BatchingPolicy(max_batch_size=16)
    busy = simulate(curve, LoadSpec(Scenario.CONCURRENCY, concurrency=16), policy)
    cpu_per_request = 1.0 + 1.0 / busy.mean_batch
    assert busy.achieved_rps == pytest.approx(2 * 1000 / cpu_per_request, rel=0.05)
    assert busy.mean_batch > 2
    alone = simulate(curve, LoadSpec(Scenario.SINGLE_STREAM), policy, requests=100)
    assert alone.latency.p50 == pytest.approx(1.1)  # compute and the client's own read
    no_budget = replace(curve, host_cores=0.0)
    unlimited = simulate(no_budget, LoadSpec(Scenario.CONCURRENCY, concurrency=16), policy)
    assert unlimited.achieved_rps > 1.5 * busy.achieved_rps


def test_executions_beside_a_busy_client_take_the_host_slowdown_longer() -> None:
    shared = LatencyCurve((1, 8), (1.0, 1.0), request_cost_ms=2.0, host_slowdown=1.5)
    policy = BatchingPolicy(max_batch_size=8, dynamic_batching=False)
    point = simulate(shared, LoadSpec(Scenario.CONCURRENCY, concurrency=2), policy, requests=200)
    # the client's 2 ms read overlaps the other request's execution: 1.5 ms instead of 1
    assert point.compute_ms == pytest.approx(1.5, rel=0.05)
    alone = simulate(shared, LoadSpec(Scenario.SINGLE_STREAM), policy, requests=100)
    assert alone.compute_ms == pytest.approx(1.0)


def test_a_lognormal_spread_is_recovered_from_its_mean_and_p99() -> None:
    sigma = math.sqrt(math.log1p(0.5**2))
    p99 = math.exp(-sigma * sigma / 2 + 2.326 * sigma)  # mean 1, cv 0.5
    assert _lognormal_cv(1.0, p99) == pytest.approx(0.5, rel=0.01)
    assert _lognormal_cv(1.0, 0.9) == 0.0


def test_a_spread_at_the_models_cap_is_printed_as_the_cap_not_as_a_measurement() -> None:
    capped = _lognormal_cv(0.05, 0.05 + 0.6)  # a p99 13x the mean: past what the model takes
    assert capped == pytest.approx(2.91, abs=0.01)
    way = replace(FLAT, overhead_ms=0.05, overhead_jitter=capped)
    assert "(spread 2.91, the most the model takes: its p99 was further out;" in way.summary
    measured = replace(way, overhead_jitter=_lognormal_cv(1.0, 3.0))
    assert "the most the model takes" not in measured.summary


def test_a_server_schedule_dealt_to_two_generator_processes_reads_answers_in_parallel() -> None:
    # the client reads each answer for 1 ms: one event loop serves at most 1000 req/s
    curve = LatencyCurve((1, 8), (0.2, 0.4), request_cost_ms=1.0)
    load = LoadSpec(Scenario.SERVER, target_rps=1500, duration_s=2.0, seed=4)
    policy = BatchingPolicy(max_batch_size=8)
    one = simulate(curve, load, policy, senders=1)
    two = simulate(curve, load, policy, senders=2)
    assert not one.stable and "grows without bound" in one.stability_note
    assert two.stable and two.latency.p99 < 20 < one.latency.p99
    assert (one.generator_processes, two.generator_processes) == (1, 2)
    assert two.achieved_rps == pytest.approx(1500, rel=0.1)


def test_a_heavy_tailed_compute_never_raises_the_capacity() -> None:
    """The jitter draws average exactly 1: a lognormal of coefficient of variation 5.5, drawn a
    few thousand times, averaged about 0.6, and a noisier configuration served more."""
    steady = LatencyCurve((1,), (0.109,), overhead_ms=0.3)
    offline = LoadSpec(Scenario.OFFLINE, seed=0)
    policy = BatchingPolicy(max_batch_size=1, dynamic_batching=False)
    base = simulate(steady, offline, policy).achieved_rps
    for cv in (0.5, 2.0, 5.5):
        noisy = simulate(replace(steady, compute_jitter=cv), offline, policy).achieved_rps
        assert noisy <= base * 1.001, (cv, noisy, base)
