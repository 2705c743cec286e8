"""The asynchronous load generator: one LoadPoint from a running Triton server and a LoadSpec.

Requests go out through tritonclient's asyncio HTTP client; end-to-end latency is timed from the
moment a request actually leaves (a late Server arrival is the generator's lag, never the
server's latency). Queue time, compute time and the batches Triton formed come from Triton's own
statistics, diffed around the measurement; its Prometheus counters likewise. Run it in a child
process (`run_load_in_child`) so the generator never shares the caller's CPU accounting.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import numpy as np
import tritonclient.http.aio as triton_http

from backend.errors import UserError
from backend.host import HostWatch, contention_note
from backend.launch.children import run_in_child
from backend.results import LatencyStats
from backend.serving.repository import TensorSpec
from backend.serving.scenarios import SCENARIOS
from backend.serving.server import ServerEndpoint, serve
from backend.serving.stability import Completed, stability
from backend.serving.types import BatchingPolicy, LoadPoint, LoadSpec, Scenario, ServingProvider
from backend.specs import MEASURE_PRESETS, MeasureSettings

LAG_LIMIT_MS = 5.0  # Server: a request leaving later than this (p99) means the client fell behind
RATE_MARGIN = 0.05  # Server: sending more than 5% slower than the schedule means the same
MAX_CONNECTIONS = 1024  # Server scenario: beyond this many in flight the server is long overloaded
SETTLE_S = 2.0  # longest wait for Triton's statistics to record the requests already answered
METRICS = (
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_infer_duration_us",
)
_METRIC_LINE = re.compile(r"^(\w+)\{([^}]*)\}\s+([0-9.eE+-]+)$")


@dataclass(frozen=True)
class Record:
    """One request: when it should have left, when it left, when it came back (s), burst."""

    scheduled_s: float | None
    sent_s: float
    done_s: float
    ok: bool
    burst: int | None = None


def _array(spec: TensorSpec, samples: int | None, rng: np.random.Generator) -> np.ndarray:
    shape = (samples, *spec.dims) if samples else spec.dims
    if spec.dtype.startswith("float"):
        return rng.standard_normal(shape).astype(spec.dtype)
    if spec.dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.integers(0, 2, size=shape).astype(spec.dtype)


@dataclass
class Driver:
    """Sends the same seeded request over and over and records each one (scenarios.Driver)."""

    client: triton_http.InferenceServerClient
    endpoint: ServerEndpoint
    inputs: list[triton_http.InferInput]
    outputs: list[triton_http.InferRequestedOutput]
    start: float = 0.0
    records: list[Record] = field(default_factory=list)

    def now(self) -> float:
        return time.perf_counter() - self.start

    async def send(self, scheduled_s: float | None = None, burst: int | None = None) -> None:
        sent = self.now()
        try:
            await self.client.infer(self.endpoint.model, self.inputs, outputs=self.outputs)
            ok = True
        except Exception:  # a failed request is counted, not fatal: the point reports errors
            ok = False
        self.records.append(Record(scheduled_s, sent, self.now(), ok, burst))


def request_inputs(endpoint: ServerEndpoint, spec: LoadSpec) -> list[triton_http.InferInput]:
    """The one seeded request every send repeats (samples_per_request along the batch axis)."""
    batched = endpoint.max_batch_size > 0
    if batched and spec.samples_per_request > endpoint.max_batch_size:
        raise UserError(
            f"Requests of {spec.samples_per_request} samples exceed the server's maximum batch "
            f"size {endpoint.max_batch_size}; send fewer samples per request."
        )
    rng = np.random.default_rng(spec.seed)
    inputs = []
    for tensor in endpoint.inputs:
        array = _array(tensor, spec.samples_per_request if batched else None, rng)
        item = triton_http.InferInput(tensor.name, list(array.shape), tensor.triton_type)
        item.set_data_from_numpy(array, binary_data=True)
        inputs.append(item)
    return inputs


async def _metrics(endpoint: ServerEndpoint) -> dict[str, float]:
    """The model's Prometheus counters (failures summed over reasons)."""
    async with aiohttp.ClientSession() as session, session.get(endpoint.metrics_url) as response:
        text = await response.text()
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _METRIC_LINE.match(line.strip())
        if match and match.group(1) in METRICS and f'model="{endpoint.model}"' in match.group(2):
            values[match.group(1)] = values.get(match.group(1), 0.0) + float(match.group(3))
    return values


@dataclass(frozen=True)
class ServerSide:
    """What Triton says happened between two snapshots."""

    queue_ms: float
    compute_ms: float
    batch_histogram: dict[int, int]
    metrics: dict[str, float]


def _server_side(before: tuple[dict, dict], after: tuple[dict, dict]) -> ServerSide:
    (stats0, metrics0), (stats1, metrics1) = before, after

    def mean_ms(key: str) -> float:
        s0, s1 = stats0["inference_stats"][key], stats1["inference_stats"][key]
        count = int(s1["count"]) - int(s0["count"])
        return (int(s1["ns"]) - int(s0["ns"])) / count / 1e6 if count else 0.0

    executions0 = {
        int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats0["batch_stats"]
    }
    histogram = {}
    for batch in stats1["batch_stats"]:
        size = int(batch["batch_size"])
        delta = int(batch["compute_infer"]["count"]) - executions0.get(size, 0)
        if delta:
            histogram[size] = delta
    metrics = {name: metrics1.get(name, 0.0) - metrics0.get(name, 0.0) for name in METRICS}
    return ServerSide(
        mean_ms("queue"), mean_ms("compute_infer"), dict(sorted(histogram.items())), metrics
    )


def _successes(stats: dict) -> int:
    return int(stats["inference_stats"]["success"]["count"])


async def _snapshot(
    client: triton_http.InferenceServerClient, endpoint: ServerEndpoint, successes: int = 0
) -> tuple[dict, dict[str, float]]:
    """Statistics and counters once at least `successes` requests are recorded: Triton records
    a request just after answering it, so a read right after the last answer may miss it."""
    deadline = time.perf_counter() + SETTLE_S
    while True:
        stats = (await client.get_inference_statistics(endpoint.model))["model_stats"][0]
        if _successes(stats) >= successes or time.perf_counter() > deadline:
            return stats, await _metrics(endpoint)
        await asyncio.sleep(0.005)


async def _measure(
    endpoint: ServerEndpoint, spec: LoadSpec, measure: MeasureSettings
) -> tuple[Driver, tuple[float, ...], ServerSide]:
    """Warm up, snapshot, drive the scenario, snapshot: records, schedule, server side."""
    # enough connections that requests never wait for one inside the client (that wait would be
    # counted as latency): N in flight, a whole burst, or about a second of Server arrivals
    rate = min(int(spec.target_rps or 0), MAX_CONNECTIONS)
    connections = max(spec.concurrency, spec.requests or 0, rate, 64)
    client = triton_http.InferenceServerClient(endpoint.http_url, conn_limit=connections)
    try:
        outputs = [
            triton_http.InferRequestedOutput(name, binary_data=True) for name in endpoint.outputs
        ]
        driver = Driver(client, endpoint, request_inputs(endpoint, spec), outputs)
        driver.start = time.perf_counter()
        initial, _ = await _snapshot(client, endpoint)
        for _ in range(measure.warmup_runs):
            await driver.send()
        if driver.records and not any(r.ok for r in driver.records):
            raise UserError("The served model answered every warm-up request with an error.")
        warm = _successes(initial) + sum(r.ok for r in driver.records)
        driver.records.clear()
        before = await _snapshot(client, endpoint, warm)
        driver.start = time.perf_counter()
        schedule = await SCENARIOS[spec.scenario].drive(driver, spec)
        done = _successes(before[0]) + sum(r.ok for r in driver.records)
        after = await _snapshot(client, endpoint, done)
        return driver, schedule, _server_side(before, after)
    finally:
        await client.close()


def saturation_reason(spec: LoadSpec, records: list[Record]) -> str:
    """Why the generator fell behind its Server schedule, or '' when it kept up."""
    if spec.scenario is not Scenario.SERVER or not records or spec.target_rps is None:
        return ""
    lags = [1000 * (r.sent_s - r.scheduled_s) for r in records if r.scheduled_s is not None]
    lag_p99 = float(np.percentile(lags, 99)) if lags else 0.0
    sent = sorted(r.sent_s for r in records)
    planned = sorted(r.scheduled_s for r in records if r.scheduled_s is not None)
    offered = (len(sent) - 1) / (sent[-1] - sent[0]) if sent[-1] > sent[0] else 0.0
    # against the schedule's own rate: a Poisson draw of a few seconds is itself off the target
    scheduled = (len(planned) - 1) / (planned[-1] - planned[0]) if len(planned) > 1 else 0.0
    limit = max(LAG_LIMIT_MS, 2000.0 / spec.target_rps)
    if lag_p99 > limit:
        return (
            f"the load generator fell behind its schedule (p99 send lag {lag_p99:.1f} ms > "
            f"{limit:.1f} ms): this rate is beyond the client, not a server measurement"
        )
    if offered < scheduled * (1 - RATE_MARGIN):
        return (
            f"the load generator offered {offered:.0f} req/s where its schedule asked for "
            f"{scheduled:.0f}: this rate is beyond the client, not a server measurement"
        )
    return ""


def run_load(
    endpoint: ServerEndpoint, spec: LoadSpec, measure: MeasureSettings | None = None
) -> LoadPoint:
    """Generate one load point against a running server (this process; see run_load_in_child)."""
    measure = measure or MEASURE_PRESETS["quick"]
    with HostWatch() as host:
        driver, schedule, server = asyncio.run(_measure(endpoint, spec, measure))
    good = [r for r in driver.records if r.ok]
    if not good:
        raise UserError(f"No request of the {spec.scenario.value} load point succeeded.")
    first = min(r.sent_s for r in driver.records)
    last = max(r.done_s for r in good)
    verdict = stability([Completed(r.sent_s, r.done_s, r.burst) for r in good], measure)
    saturated = saturation_reason(spec, driver.records)
    metrics = {
        **server.metrics,
        "ort_intra_op_threads": float(endpoint.intra_op_threads),
    }
    notes = endpoint.notes
    if host.share is not None:  # the server is another process: only the machine's totals
        metrics["host_busy_cores"] = round(host.share.busy_cores, 3)
        metrics["host_steal_fraction"] = round(host.share.steal_fraction, 4)
        stolen = contention_note({"host_steal_fraction": host.share.steal_fraction})
        notes = (*notes, stolen) if stolen else notes
    return LoadPoint(
        scenario=spec.scenario,
        policy=endpoint.policy,
        spec=spec,
        achieved_rps=len(good) / (last - first) if last > first else 0.0,
        latency=LatencyStats.from_samples([1000 * (r.done_s - r.sent_s) for r in good]),
        queue_ms=server.queue_ms,
        compute_ms=server.compute_ms,
        batch_histogram=server.batch_histogram,
        stable=verdict.stable and not saturated,
        stability_note=f"{verdict.note}; {saturated}" if saturated else verdict.note,
        generator_saturated=bool(saturated),
        errors=len(driver.records) - len(good),
        arrival_schedule_s=schedule,
        server_metrics=metrics,
        notes=notes,
        provider=endpoint.provider,
        session_providers=endpoint.session_providers,
    )


def run_load_in_child(
    endpoint: ServerEndpoint,
    spec: LoadSpec,
    measure: MeasureSettings | None = None,
    timeout_s: float | None = None,
) -> LoadPoint:
    """run_load in a child started by the one launcher: the generator's CPU is its own."""
    limit = timeout_s or spec.duration_s * 4 + 60
    outcome = run_in_child(
        run_load, endpoint, spec, measure, timeout_s=limit, what="The load generator"
    )
    return outcome.value_or_raise("The load generator")


def serve_and_measure(
    model_path: Path,
    policy: BatchingPolicy,
    specs: Sequence[LoadSpec],
    *,
    measure: MeasureSettings | None = None,
    dims: dict[str, int] | None = None,
    intra_op_threads: int | None = None,
    on_point: Callable[[LoadPoint], None] | None = None,
    provider: ServingProvider = ServingProvider.CPU,
) -> list[LoadPoint]:
    """Serve the ONNX file under `policy` on a real Triton server, measure each spec from a
    child process (the generator apart from the caller), stop the server; the points in order.

    The policy recorded on each point is the one really served (a fixed-batch model's differs).
    """
    points = []
    with serve(
        model_path, policy, dims=dims, intra_op_threads=intra_op_threads, provider=provider
    ) as server:
        for spec in specs:
            point = run_load_in_child(server.endpoint, spec, measure)
            points.append(point)
            if on_point is not None:
                on_point(point)
    return points
