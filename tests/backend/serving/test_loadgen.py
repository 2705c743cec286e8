"""Load points against the real server: batches Triton formed, the seeded schedule, saturation."""

from __future__ import annotations

import os

import pytest

from backend.errors import UserError
from backend.serving.loadgen import run_load, run_load_in_child, saturation_reason
from backend.serving.scenarios import (
    RPS_PER_GENERATOR,
    SCENARIOS,
    generator_processes,
    poisson_schedule,
)
from backend.serving.sender import Record
from backend.serving.server import TritonServer
from backend.serving.types import LoadPoint, LoadSpec, Scenario, ServingProvider
from backend.specs import MEASURE_PRESETS
from tests.backend.serving.conftest import POLICY

QUICK = MEASURE_PRESETS["quick"]


def test_every_scenario_is_registered_by_name() -> None:
    assert set(SCENARIOS) == set(Scenario)


def test_concurrency_makes_triton_form_batches_and_its_counters_agree(
    server: TritonServer,
) -> None:
    spec = LoadSpec(Scenario.CONCURRENCY, duration_s=1.5, concurrency=8)
    point = run_load_in_child(server.endpoint, spec, QUICK)  # the CLI's path
    assert point.errors == 0 and point.latency.count > 0 and point.achieved_rps > 0
    assert max(point.batch_histogram) > 1 and point.mean_batch > 1
    assert max(point.batch_histogram) <= POLICY.max_batch_size
    executions = sum(point.batch_histogram.values())
    inferences = sum(size * count for size, count in point.batch_histogram.items())
    # the statistics API and the Prometheus counters are two views of the same executions
    assert point.server_metrics["nv_inference_exec_count"] == executions
    assert point.server_metrics["nv_inference_count"] == inferences == point.latency.count
    assert point.queue_ms > 0 and point.compute_ms > 0
    assert point.stability_note.startswith(("stable:", "unstable:"))
    # the machine's CPUs meanwhile: the generator and the server kept some of them busy
    assert 0 < point.server_metrics["host_busy_cores"] <= (os.cpu_count() or 1) + 0.1
    assert 0 <= point.server_metrics["host_steal_fraction"] < 1
    # the provider asked for and the one ONNX Runtime's session really used ride on the point
    assert point.provider is ServingProvider.CPU
    assert point.session_providers == ("CPUExecutionProvider",)
    assert point.session_options == ()  # only a CUDA session reports options (cuDNN search)
    assert LoadPoint.from_dict(point.to_dict()) == point


def test_server_scenario_follows_the_schedule_drawn_from_its_seed(server: TritonServer) -> None:
    spec = LoadSpec(Scenario.SERVER, duration_s=1.0, target_rps=60, seed=7)
    point = run_load(server.endpoint, spec, QUICK)
    assert point.arrival_schedule_s == poisson_schedule(60, 1.0, 7)
    assert point.arrival_schedule_s != poisson_schedule(60, 1.0, 8)
    assert point.latency.count + point.errors == len(point.arrival_schedule_s)
    assert all(0 <= t < 1.0 for t in point.arrival_schedule_s)
    assert point.generator_saturated == ("beyond the client" in point.stability_note)


def test_a_fast_server_point_is_dealt_out_to_processes_on_one_schedule(
    server: TritonServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_LOADGEN_PROCESSES", "2")
    spec = LoadSpec(Scenario.SERVER, duration_s=1.0, target_rps=400, seed=3)
    assert generator_processes(spec) == 2
    point = run_load_in_child(server.endpoint, spec, QUICK)  # the load child starts two more
    assert point.generator_processes == 2
    # the very schedule one process would have sent, every request of it sent once
    assert point.arrival_schedule_s == poisson_schedule(400, 1.0, 3)
    assert point.latency.count + point.errors == len(point.arrival_schedule_s)
    # Triton's statistics bracket exactly these requests: no part's warm-up request is counted
    inferences = sum(size * count for size, count in point.batch_histogram.items())
    assert inferences == point.server_metrics["nv_inference_count"] == point.latency.count
    assert point.generator_saturated == ("beyond the client" in point.stability_note)
    assert LoadPoint.from_dict(point.to_dict()) == point


def test_only_server_points_past_one_processs_rate_split_up_to_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPTIBOARD_LOADGEN_PROCESSES", "3")
    closed = LoadSpec(Scenario.CONCURRENCY, duration_s=1.0, concurrency=64)
    slow = LoadSpec(Scenario.SERVER, duration_s=1.0, target_rps=RPS_PER_GENERATOR)
    fast = LoadSpec(Scenario.SERVER, duration_s=1.0, target_rps=RPS_PER_GENERATOR * 1.5)
    flood = LoadSpec(Scenario.SERVER, duration_s=1.0, target_rps=RPS_PER_GENERATOR * 10)
    assert [generator_processes(s) for s in (closed, slow, fast, flood)] == [1, 1, 2, 3]
    monkeypatch.setenv("OPTIBOARD_LOADGEN_PROCESSES", "0")  # half the cores less one
    assert generator_processes(flood) == max(1, (os.cpu_count() or 2) // 2 - 1)


def test_offline_sends_bursts_and_judges_each_burst_as_a_window(server: TritonServer) -> None:
    spec = LoadSpec(Scenario.OFFLINE, duration_s=0.5, requests=16)
    point = run_load(server.endpoint, spec, QUICK)
    assert point.latency.count % 16 == 0 and point.latency.count >= 16
    assert point.mean_batch > 1


def test_a_request_larger_than_the_servers_maximum_batch_is_refused(
    server: TritonServer,
) -> None:
    spec = LoadSpec(Scenario.SINGLE_STREAM, duration_s=0.2, samples_per_request=17)
    with pytest.raises(UserError, match="maximum batch size 16"):
        run_load(server.endpoint, spec, QUICK)


def _records(schedule: list[float], lag_s: float) -> list[Record]:
    return [Record(t, t + lag_s, t + lag_s + 0.001, True) for t in schedule]


def test_a_generator_behind_its_schedule_is_saturated_not_the_server() -> None:
    spec = LoadSpec(Scenario.SERVER, duration_s=1.0, target_rps=200, seed=1)
    schedule = list(poisson_schedule(200, 1.0, 1))
    assert saturation_reason(spec, _records(schedule, 0.0001)) == ""
    late = [Record(t, t * 1.5, t * 1.5 + 0.001, True) for t in schedule]  # 50% slower
    assert "fell behind its schedule" in saturation_reason(spec, late)
    # barely late (under the lag limit) but sending 7% slower than the schedule asks
    slow = [Record(t, t * 1.07, t * 1.07 + 0.001, True) for t in schedule if t < 0.14]
    assert "offered" in saturation_reason(spec, slow) and "beyond the client" in saturation_reason(
        spec, slow
    )


def test_a_rate_no_client_can_send_stops_a_second_behind_and_is_saturated(
    server: TritonServer,
) -> None:
    """50,000 req/s for 2 s: before, the generator kept issuing the 100,000 requests long after
    it fell behind, ran past its child's time limit and failed the whole study (walkthrough 4).
    Now it stops once a second behind its schedule, and the point says so."""
    spec = LoadSpec(Scenario.SERVER, duration_s=2.0, target_rps=50_000, seed=5)
    planned = len(poisson_schedule(50_000, 2.0, 5))
    point = run_load(server.endpoint, spec, QUICK)
    sent = len(point.arrival_schedule_s)
    assert 0 < sent < planned
    assert point.latency.count + point.errors == sent
    assert point.generator_saturated and not point.stable
    assert f"stopped sending after {sent} of {planned} requests, 1 s behind" in (
        point.stability_note
    )
    # a point never stable opens on why, not on its windows' "stable: ..."
    assert not point.stability_note.startswith(("stable", "unstable"))
    assert "; its windows alone: " in point.stability_note
