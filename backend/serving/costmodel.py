"""The simulation's cost model, measured on the real server: where each per-request cost sits.

One server (dynamic batching, no queue delay, one instance) gives everything, each piece read
from a measurement and never fitted to a load point the simulation is then judged on:
- the latency-vs-batch curve (serving.curve: one request of b samples at a time);
- one request in flight: Triton's compute_input + compute_output per request (the instance's
  per-request work, `response_cost_ms`), batch 1's compute (thousands of executions: it
  replaces the curve's first point), and the end-to-end time that is neither these, the
  batcher's queue, nor the generator's own CPU (the way in and out, `overhead_ms`), with its
  spread at p99 (`overhead_jitter`);
- a few requests in flight: the generator's CPU time per request (its one event loop,
  `request_cost_ms`), and how much longer each execution took than the same batch alone
  (`host_slowdown`: the generator and the server share the cores).
A second server with two instances (optional) gives how two executions at once slow each other,
and the cores the host gives when more than one execution can run. A third (optional) holds
batches for a queue delay at one request in flight: how late Triton's batcher thread wakes up
after the delay (`delay_overshoot_ms`, from Triton's own queue time per request), and how much
longer the rest of such a request takes after the idle wait (`held_wake_ms`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from backend.launch.children import run_in_child
from backend.runtimeenvs import DEFAULT
from backend.serving.curve import measure_latency_curve
from backend.serving.host_sample import HostSample, sample_load
from backend.serving.loadgen import run_load
from backend.serving.server import ServerEndpoint, TritonServer, serve
from backend.serving.types import (
    MAX_SIGMA,
    BatchingPolicy,
    LatencyCurve,
    LoadPoint,
    LoadSpec,
    Scenario,
    ServingProvider,
)
from backend.specs import MEASURE_PRESETS

LOADED_IN_FLIGHT = 4  # the cost measurement's load; the bench judges 1 and 8 in flight
PAIR_IN_FLIGHT = 4  # on the two-instance server: two queued per instance keep both busy
Z99 = 2.326  # standard normal quantile at 0.99
MAX_SLOWDOWN = 10.0


@dataclass(frozen=True)
class CostMeasurement:
    """The cost curve and the measurements it was read from."""

    curve: LatencyCurve
    single: HostSample
    loaded: HostSample
    two_instances: HostSample | None = None
    then: tuple[LoadPoint, ...] = ()  # points measured right after, on the same server
    delay_probe: HostSample | None = None
    measured_curve: LatencyCurve | None = None  # the curve as measured, before `costs_from_samples`

    def to_dict(self) -> dict[str, Any]:
        """Everything measured, so a changed `costs_from_samples` is judged on the same samples."""

        def sample(s: HostSample | None) -> dict[str, Any] | None:
            return s.to_dict() if s else None

        return {
            "curve": asdict(self.curve),
            "single": self.single.to_dict(),
            "loaded": self.loaded.to_dict(),
            "two_instances": sample(self.two_instances),
            "then": [p.to_dict() for p in self.then],
            "delay_probe": sample(self.delay_probe),
            "measured_curve": asdict(self.measured_curve) if self.measured_curve else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CostMeasurement:
        def sample(d: dict[str, Any] | None) -> HostSample | None:
            return HostSample.from_dict(d) if d else None

        measured = data["measured_curve"]
        return cls(
            LatencyCurve.from_dict(data["curve"]),
            HostSample.from_dict(data["single"]),
            HostSample.from_dict(data["loaded"]),
            sample(data["two_instances"]),
            tuple(LoadPoint.from_dict(p) for p in data["then"]),
            sample(data["delay_probe"]),
            LatencyCurve.from_dict(measured) if measured else None,
        )

    def recomputed(self) -> LatencyCurve:
        """`costs_from_samples` applied again to the stored samples (after a change to it)."""
        assert self.measured_curve is not None, "stored before the measured curve was kept"
        return costs_from_samples(
            self.measured_curve, self.single, self.loaded, self.two_instances, self.delay_probe
        )


def _lognormal_cv(mean: float, p99: float) -> float:
    """The coefficient of variation of a lognormal law of this mean whose p99 is `p99`."""
    ratio = p99 / mean if mean > 0 else 1.0
    if ratio <= 1.0:
        return 0.0
    low, high = 0.0, MAX_SIGMA  # sigma: p99/mean = exp(-sigma^2/2 + Z99 sigma) rises up to Z99
    for _ in range(40):
        middle = (low + high) / 2
        if math.exp(-middle * middle / 2 + Z99 * middle) < ratio:
            low = middle
        else:
            high = middle
    sigma = (low + high) / 2
    return math.sqrt(math.expm1(sigma * sigma))


def costs_from_samples(
    curve: LatencyCurve,
    single: HostSample,
    loaded: HostSample,
    two_instances: HostSample | None = None,
    delay_probe: HostSample | None = None,
) -> LatencyCurve:
    """The curve with every per-request cost read from the samples (module docstring)."""
    ex = single.executions
    response = ex.response_ms
    compute_one = ex.busy_ms.get(1, curve.compute_ms_at(1) + response) - response
    if 1 in ex.busy_ms and curve.batch_sizes[0] == 1:
        # thousands of lone executions time batch 1 better than the curve's first few, which
        # a freshly started server runs first (warm-up)
        curve = replace(curve, compute_ms=(max(compute_one, 1e-6), *curve.compute_ms[1:]))
    latency, client = single.point.latency, loaded.client_cpu_ms
    # the rest of one request's mean time alone (the batcher's hand-over included; the mean,
    # as one in flight serves 1 / mean); the generator's idle-loop wake-ups, which requests back
    # to back do not pay, count here too
    overhead = max(0.0, latency.mean - compute_one - response - client)
    jitter = _lognormal_cv(overhead, overhead + latency.p99 - latency.mean) if overhead else 0.0
    # each loaded execution against the same batch alone: the one-in-flight execution scaled by
    # the curve's shape (both a few seconds apart on a shared host: compare like with like)
    one = curve.compute_ms_at(1) + response
    scale = (compute_one + response) / one if one > 0 else 1.0
    measured = sum(n * loaded.executions.busy_ms[b] for b, n in loaded.executions.count.items())
    alone = scale * sum(
        n * (curve.compute_ms_at(b) + b * response) for b, n in loaded.executions.count.items()
    )
    host = min(MAX_SLOWDOWN, max(1.0, measured / alone)) if alone > 0 else 1.0
    # the host's budget: what the generator and the server spent per request under load, and
    # the cores they got; the executions' own time is charged apart (per batch)
    per_request = loaded.client_cpu_ms + loaded.server_cpu_ms
    requests = max(loaded.executions.requests, 1)
    cores = _cores_used(loaded)
    if two_instances is not None:  # one instance runs one execution at a time; two show more
        cores = max(cores, _cores_used(two_instances))
    host_cpu = max(client, per_request - alone / requests)
    slowdown: tuple[float, ...] = curve.instance_slowdown
    if two_instances is not None and two_instances.executions.count:
        both = two_instances.executions
        per_execution = sum(n * both.busy_ms[b] for b, n in both.count.items()) / sum(
            both.count.values()
        )
        factor = per_execution / ((curve.compute_ms_at(1) + response) * host)
        slowdown = (1.0, min(MAX_SLOWDOWN, max(1.0, factor)))
    return replace(
        curve,
        overhead_ms=overhead,
        overhead_jitter=jitter,
        request_cost_ms=client,
        response_cost_ms=response,
        host_slowdown=host,
        instance_slowdown=slowdown,
        host_cpu_ms=host_cpu,
        host_cores=min(cores, float(os.cpu_count() or 1)),
        delay_overshoot_ms=_delay_overshoot(single, delay_probe),
        held_wake_ms=_held_wake(single, delay_probe),
    )


def _held_wake(single: HostSample, probe: HostSample | None) -> float:
    """How much longer a lone request held for a delay took outside Triton's queue than one
    sent at once: the idle host's slower wake-ups (the mean latencies, both one in flight)."""
    if probe is None:
        return 0.0
    queued = probe.executions.queue_ms - single.executions.queue_ms
    return max(0.0, probe.point.latency.mean - single.point.latency.mean - queued)


def _cores_used(sample: HostSample) -> float:
    """The cores the generator and the server kept busy during a sample (CPU over wall time)."""
    requests = max(sample.executions.requests, 1)
    cpu_ms = (sample.client_cpu_ms + sample.server_cpu_ms) * requests
    return cpu_ms / 1000 / sample.wall_s if sample.wall_s > 0 else 0.0


def _delay_overshoot(single: HostSample, probe: HostSample | None) -> float:
    """How much longer than its max_queue_delay a lone request waited in Triton's queue, less
    the hand-over that a request pays without a delay (Triton's queue time, both one in flight)."""
    if probe is None:
        return 0.0
    delay_ms = probe.point.policy.max_queue_delay_us / 1000.0
    return max(0.0, probe.executions.queue_ms - delay_ms - single.executions.queue_ms)


def _measure_on_server(
    endpoint: ServerEndpoint,
    group: int,
    sizes: tuple[int, ...],
    requests_per_size: int,
    duration_s: float,
    then: tuple[LoadSpec, ...],
) -> tuple[LatencyCurve, HostSample, HostSample, tuple[LoadPoint, ...]]:
    """In one child: the curve, one and LOADED_IN_FLIGHT requests in flight, then `then`."""
    curve = measure_latency_curve(endpoint, sizes, requests_per_size=requests_per_size)
    single = sample_load(endpoint, LoadSpec(Scenario.CONCURRENCY, duration_s=duration_s), group)
    spec = LoadSpec(Scenario.CONCURRENCY, concurrency=LOADED_IN_FLIGHT, duration_s=duration_s)
    loaded = sample_load(endpoint, spec, group)
    points = tuple(run_load(endpoint, spec, MEASURE_PRESETS["quick"]) for spec in then)
    return curve, single, loaded, points


def _group(server: TritonServer) -> int:
    """The server's process group (it was started in a session of its own)."""
    assert server.process is not None, "a started server has a process"
    return server.process.pid


class CostMeasurementCancelled(Exception):
    """should_cancel said stop: the measuring child was killed and its server stopped."""


def _in_child(
    func: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    should_cancel: Callable[[], bool] | None,
) -> Any:
    """func's value from a limited child; CostMeasurementCancelled when should_cancel stopped it."""
    what = "The serving cost measurement"
    outcome = run_in_child(func, *args, timeout_s=timeout_s, should_cancel=should_cancel, what=what)
    if outcome.cancelled:
        raise CostMeasurementCancelled
    return outcome.value_or_raise(what)


def _one_sample(
    model_path: Path,
    policy: BatchingPolicy,
    spec: LoadSpec,
    served: dict[str, Any],
    should_cancel: Callable[[], bool] | None,
) -> HostSample:
    """One more server, one load point sampled on it (measure_costs_on_server's optional probes)."""
    if should_cancel is not None and should_cancel():
        raise CostMeasurementCancelled
    with serve(model_path, policy, **served) as server:
        return _in_child(
            sample_load,
            server.endpoint,
            spec,
            _group(server),
            timeout_s=60 + 8 * spec.duration_s,
            should_cancel=should_cancel,
        )


def measure_costs_on_server(
    model_path: Path,
    batch_sizes: Sequence[int] = (1, 2, 4, 8, 16),
    *,
    requests_per_size: int = 20,
    duration_s: float = 1.5,
    dims: dict[str, int] | None = None,
    intra_op_threads: int | None = None,
    two_instances: bool = False,
    then: Sequence[LoadSpec] = (),
    delay_probe_us: int = 0,
    provider: ServingProvider = ServingProvider.CPU,
    should_cancel: Callable[[], bool] | None = None,
    runtime_env: str = DEFAULT,
) -> CostMeasurement:
    """Serve the file on the real Triton server and measure every input of the simulation.

    With two_instances, a second server (no batching, two instances, PAIR_IN_FLIGHT in flight:
    both always busy, the host's cores pressed) measures how two executions at once slow each
    other and the cores the host gives; without, the curve keeps no instance slowdown.
    `then`: load points measured right after on the same server (dynamic batching up to the
    largest size, no delay), seconds apart from the cost measurement on a host whose load moves.
    With delay_probe_us, one more server holds batches that long (no preferred sizes) at one
    request in flight: how late the batcher sends a held batch; without, it sends on time.
    Every server runs the provider's instances, on runtime_env's onnxruntime. should_cancel is
    asked while each child measures and before each further server: True kills the child, stops
    its server and raises CostMeasurementCancelled (a worker's job was cancelled).
    """
    sizes = tuple(sorted(set(batch_sizes)))
    policy = BatchingPolicy(max_batch_size=max(sizes))
    served = {"dims": dims, "intra_op_threads": intra_op_threads, "provider": provider}
    served["runtime_env"] = runtime_env
    limit = 120 + 2 * requests_per_size * len(sizes) + 8 * duration_s
    limit += sum(4 * spec.duration_s + 10 for spec in then)
    with serve(model_path, policy, **served) as server:
        curve, single, loaded, points = _in_child(
            _measure_on_server,
            server.endpoint,
            _group(server),
            sizes,
            requests_per_size,
            duration_s,
            tuple(then),
            timeout_s=limit,
            should_cancel=should_cancel,
        )
    pair = None
    if two_instances:
        two = BatchingPolicy(max_batch_size=max(sizes), dynamic_batching=False, instance_count=2)
        spec = LoadSpec(Scenario.CONCURRENCY, concurrency=PAIR_IN_FLIGHT, duration_s=duration_s)
        pair = _one_sample(model_path, two, spec, served, should_cancel)
    probe = None
    if delay_probe_us > 0:
        held = BatchingPolicy(max_batch_size=max(sizes), max_queue_delay_us=delay_probe_us)
        spec = LoadSpec(Scenario.CONCURRENCY, duration_s=duration_s)
        probe = _one_sample(model_path, held, spec, served, should_cancel)
    inputs = costs_from_samples(curve, single, loaded, pair, probe)
    return CostMeasurement(inputs, single, loaded, pair, points, probe, measured_curve=curve)
