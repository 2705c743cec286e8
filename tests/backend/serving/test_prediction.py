"""The batcher simulation against the real Triton server, on a model whose curve is measured here.

The model reads a 36 MB weight matrix whatever the batch, so one execution costs about the same
for 1 or 4 samples: at 8 in flight Triton forms batches of several requests, and a simulation
that models the batcher wrongly (requests spread out before the queue, batches of 1) misses the
batch size by more than the tolerance below; the throughput check only catches gross errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from backend.serving.costmodel import CostMeasurement, measure_costs_on_server
from backend.serving.server import TritonEnvironment
from backend.serving.simulate import simulate
from backend.serving.types import BatchingPolicy, LoadSpec, Scenario
from tests import models

# Loose enough for a shared 2-core host, tight enough that batches of 1 against 3 fail.
BATCH_FACTOR = 2.0  # predicted mean batch within half to twice the measured one
# Throughput within half to twice the measured: the same point measured a minute apart on the
# shared host moves by more than a third, and the cost measurement seconds before by as much.
RATE_FACTOR = 2.0
# One ONNX Runtime thread: no idle thread pool spinning, so the CPU the server spends per
# request (the simulation's host budget) is the requests' own.
THREADS = 1


def _weight_bound_model(path: Path, features: int = 64, width: int = 3072) -> Path:
    """x[N, 64] -> MatMul -> Relu -> MatMul by a width x width matrix: memory bound."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.normal(0, 0.1, (features, width)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.normal(0, 0.02, (width, width)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "weight_bound",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])],
        weights,
    )
    return models.save(models._finish(graph), path)


def test_predicted_throughput_and_batch_sizes_match_the_real_server_at_eight_in_flight(
    triton_environment: TritonEnvironment, tmp_path: Path
) -> None:
    path = _weight_bound_model(tmp_path / "weight_bound.onnx")
    spec = LoadSpec(Scenario.CONCURRENCY, concurrency=8, duration_s=2.0)
    costs = measure_costs_on_server(
        path,
        (1, 2, 4, 8),
        requests_per_size=8,
        duration_s=1.5,
        intra_op_threads=THREADS,
        then=[spec],  # measured right after, on the same server: the host's load moves
        delay_probe_us=1000,
    )
    curve, (measured,) = costs.curve, costs.then
    assert costs.loaded.point.spec.concurrency != spec.concurrency  # another load
    assert curve.request_cost_ms > 0 and curve.host_cores > 0 and curve.response_cost_ms > 0
    probe = costs.delay_probe
    assert probe is not None and probe.point.policy.max_queue_delay_us == 1000
    assert probe.executions.queue_ms >= 1.0  # Triton held each lone request the whole delay
    late = probe.executions.queue_ms - 1.0 - costs.single.executions.queue_ms
    assert curve.delay_overshoot_ms == max(0.0, late)
    # every sample survives a JSON round trip, and the curve is derived again from them alone
    stored = CostMeasurement.from_dict(json.loads(json.dumps(costs.to_dict())))
    assert stored == costs and stored.recomputed() == curve

    predicted = simulate(curve, spec, BatchingPolicy(max_batch_size=8))
    loaded = costs.loaded.point
    print(  # shown when the test fails: what the host did during the cost measurement and after
        f"costs measured at {loaded.spec.concurrency} in flight: {loaded.achieved_rps:.0f} req/s, "
        f"batch {loaded.mean_batch:.2f}; {curve}\nmeasured {measured.achieved_rps:.0f} req/s, "
        f"batch {measured.mean_batch:.2f}; predicted {predicted.achieved_rps:.0f} req/s, "
        f"batch {predicted.mean_batch:.2f}"
    )
    assert measured.errors == 0 and measured.mean_batch > 1.5  # Triton really batches here
    assert 1 / BATCH_FACTOR < predicted.mean_batch / measured.mean_batch < BATCH_FACTOR
    assert 1 / RATE_FACTOR < predicted.achieved_rps / measured.achieved_rps < RATE_FACTOR
