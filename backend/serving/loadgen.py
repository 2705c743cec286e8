"""The asynchronous load generator: one LoadPoint from a running Triton server and a LoadSpec.

Requests go out through tritonclient's asyncio HTTP client; end-to-end latency is timed from the
moment a request actually leaves (a late Server arrival is the generator's lag, never the
server's latency). Queue time, compute time and the batches Triton formed come from Triton's own
statistics, diffed around the measurement; its Prometheus counters likewise. Run it in a child
process (`run_load_in_child`) so the generator never shares the caller's CPU accounting.
`measure_load` returns the point with the requests it was computed from (samples.py).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import numpy as np
import tritonclient.http.aio as triton_http

import settings
from backend import energy
from backend.counts import counted
from backend.errors import UserError
from backend.hardware import visible_gpu_index
from backend.host import HostWatch, contention_note
from backend.launch.children import run_in_child
from backend.results import LatencyStats
from backend.runtimeenvs import DEFAULT
from backend.serving.samples import MeasuredLoad, RequestSamples
from backend.serving.scenarios import (
    GIVE_UP_LAG_S,
    SCENARIOS,
    arrival_schedule,
    generator_processes,
)
from backend.serving.sender import (
    PART_WARMUP,
    Record,
    TritonSender,
    drive_part,
    make_sender,
    open_client,
)
from backend.serving.server import ServerEndpoint, serve
from backend.serving.stability import Completed, stability
from backend.serving.types import (
    CPU_ENERGY_NOTE,
    BatchingPolicy,
    LoadPoint,
    LoadSpec,
    Scenario,
    ServingProvider,
)
from backend.specs import MEASURE_PRESETS, MeasureSettings

LAG_LIMIT_MS = 5.0  # Server: a request leaving later than this (p99) means the client fell behind
RATE_MARGIN = 0.05  # Server: sending more than 5% slower than the schedule means the same
SETTLE_S = 2.0  # longest wait for Triton's statistics to record the requests already answered
PART_START_S = 4.0  # the schedule's zero this far ahead: the parts' spawn, imports, connections
SNAPSHOT_LEAD_S = 0.3  # the statistics before a split point are read this long before its zero
METRICS = (
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_infer_duration_us",
)
# RAPL counts the whole package: the load generator's own work on this CPU is in the joules too
_METRIC_LINE = re.compile(r"^(\w+)\{([^}]*)\}\s+([0-9.eE+-]+)$")


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


def load_time_limit_s(spec: LoadSpec) -> float:
    """How long a child that generates the spec's load may run before it is stopped."""
    return spec.duration_s * 4 + 60


async def _drive_split(
    sender: TritonSender, spec: LoadSpec, warm: int, parts: int
) -> tuple[list[Record], tuple[float, ...], tuple[dict, dict]]:
    """The Server schedule dealt out round-robin to `parts` child processes, all started by the
    one launcher and sending on one clock; the schedule is the one a single process would send."""
    schedule = arrival_schedule(spec)
    zero = time.perf_counter() + PART_START_S
    limit = load_time_limit_s(spec)
    what = "A load generator process"
    started = [
        asyncio.ensure_future(
            asyncio.to_thread(
                run_in_child,
                drive_part,
                sender.endpoint,
                spec,
                schedule[part::parts],
                zero,
                timeout_s=limit,
                what=what,
            )
        )
        for part in range(parts)
    ]
    await asyncio.sleep(max(0.0, zero - SNAPSHOT_LEAD_S - time.perf_counter()))
    before = await _snapshot(sender.client, sender.endpoint, warm + parts * PART_WARMUP)
    outcomes = await asyncio.gather(*started)
    records = [record for outcome in outcomes for record in outcome.value_or_raise(what)]
    if len(records) < len(schedule):  # a part gave up behind its schedule: what was sent
        schedule = tuple(sorted(r.scheduled_s for r in records if r.scheduled_s is not None))
    return sorted(records, key=lambda r: r.sent_s), schedule, before


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
    endpoint: ServerEndpoint,
    spec: LoadSpec,
    measure: MeasureSettings,
    parts: int,
    meter: energy.EnergyMeter,
) -> tuple[list[Record], tuple[float, ...], ServerSide, energy.Reading]:
    """Warm up, snapshot, drive the scenario (here, or split over `parts` processes), snapshot:
    records, schedule, server side, and the energy the meter read over the same span."""
    client = open_client(endpoint, spec)
    try:
        sender = make_sender(client, endpoint, spec)
        sender.start = time.perf_counter()
        initial, _ = await _snapshot(client, endpoint)
        for _ in range(measure.warmup_runs):
            await sender.send()
        if sender.records and not any(r.ok for r in sender.records):
            raise UserError("The served model answered every warm-up request with an error.")
        warm = _successes(initial) + sum(r.ok for r in sender.records)
        sender.records.clear()
        tracked = meter.track() if meter.measurable else nullcontext(energy.Reading())
        with tracked as reading:
            if parts > 1:
                records, schedule, before = await _drive_split(sender, spec, warm, parts)
            else:
                before = await _snapshot(client, endpoint, warm)
                sender.start = time.perf_counter()
                schedule = await SCENARIOS[spec.scenario].drive(sender, spec)
                records = sender.records
            done = _successes(before[0]) + sum(r.ok for r in records)
            after = await _snapshot(client, endpoint, done)
        return records, schedule, _server_side(before, after), reading
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
    return measure_load(endpoint, spec, measure).point


def measure_load(
    endpoint: ServerEndpoint, spec: LoadSpec, measure: MeasureSettings | None = None
) -> MeasuredLoad:
    """run_load, with each request's timings kept (a serving study stores them beside the
    point); the point's latency figures are computed from exactly those samples."""
    measure = measure or MEASURE_PRESETS["quick"]
    parts = generator_processes(spec)
    # the server's device: its GPU (Triton's KIND_GPU is GPU 0 of what it sees), else the CPU
    with energy.meter_for(endpoint.provider.value, [visible_gpu_index()]) as meter:
        idle = meter.idle(energy.IDLE_SECONDS)  # the server up, no request: apart
        with HostWatch() as host:
            run = _measure(endpoint, spec, measure, parts, meter)
            records, schedule, server, reading = asyncio.run(run)
        good = [r for r in records if r.ok]
        spent = energy.energy_report(meter, [(reading, len(good))], idle, per="request")
    if not good:
        raise UserError(f"No request of the {spec.scenario.value} load point succeeded.")
    samples = RequestSamples.from_records(good)
    # from every request even where the samples keep one in k (samples.MAX_KEPT)
    every = samples if not samples.thinned else RequestSamples.from_records(good, len(good))
    first = min(r.sent_s for r in records)
    last = max(r.done_s for r in good)
    verdict = stability([Completed(r.sent_s, r.done_s, r.burst) for r in good], measure)
    saturated = _saturation(spec, records, schedule, parts)
    metrics, notes = _metrics_and_notes(endpoint, server, host, spent)
    point = LoadPoint(
        scenario=spec.scenario,
        policy=endpoint.policy,
        spec=spec,
        achieved_rps=len(good) / (last - first) if last > first else 0.0,
        latency=LatencyStats.from_samples(every.latency_ms),
        queue_ms=server.queue_ms,
        compute_ms=server.compute_ms,
        batch_histogram=server.batch_histogram,
        stable=verdict.stable and not saturated,
        # saturated: never stable, so the note opens on why ("stable: ..." first misread)
        stability_note=(
            f"{saturated}; its windows alone: {verdict.note}" if saturated else verdict.note
        ),
        generator_saturated=bool(saturated),
        errors=len(records) - len(good),
        arrival_schedule_s=schedule,
        server_metrics=metrics,
        notes=notes,
        provider=endpoint.provider,
        session_providers=endpoint.session_providers,
        generator_processes=parts,
        session_options=endpoint.session_options,
        energy=spent,
        runtime_env=endpoint.runtime_env,
        onnxruntime=endpoint.onnxruntime,
    )
    return MeasuredLoad(point, samples)


def _metrics_and_notes(
    endpoint: ServerEndpoint, server: ServerSide, host: HostWatch, spent: energy.EnergyReport
) -> tuple[dict[str, float], tuple[str, ...]]:
    """The point's server metrics with the host's share, and its notes (a busy host, energy)."""
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
    if spent.measured and endpoint.provider is ServingProvider.CPU:
        notes = (*notes, CPU_ENERGY_NOTE)
    return metrics, notes


def run_load_in_child(
    endpoint: ServerEndpoint,
    spec: LoadSpec,
    measure: MeasureSettings | None = None,
    timeout_s: float | None = None,
) -> LoadPoint:
    """run_load in a child started by the one launcher: the generator's CPU is its own."""
    limit = timeout_s or load_time_limit_s(spec)
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
    runtime_env: str = DEFAULT,
) -> list[LoadPoint]:
    """Serve the ONNX file under `policy` on a real Triton server (on runtime_env's onnxruntime),
    measure each spec from a child process (the generator apart from the caller), stop the
    server; the points in order.

    The policy recorded on each point is the one really served (a fixed-batch model's differs).
    """
    points = []
    with serve(
        model_path,
        policy,
        dims=dims,
        intra_op_threads=intra_op_threads,
        provider=provider,
        runtime_env=runtime_env,
    ) as server:
        for spec in specs:
            point = run_load_in_child(server.endpoint, spec, measure)
            points.append(point)
            if on_point is not None:
                on_point(point)
    return points


def _saturation(
    spec: LoadSpec, records: list[Record], schedule: tuple[float, ...], parts: int
) -> str:
    """Why the point is the client's limit, not the server's ('' when the client kept up): it
    fell behind, or gave up on the rest of its schedule, with the processes that sent it."""
    saturated = saturation_reason(spec, records)
    planned = len(arrival_schedule(spec)) if spec.scenario is Scenario.SERVER else 0
    if len(schedule) < planned:
        stopped = (
            f"the load generator stopped sending after {len(schedule)} of {planned} requests, "
            f"{GIVE_UP_LAG_S:g} s behind its schedule"
        )
        saturated = (
            f"{saturated}; {stopped}"
            if saturated
            else f"{stopped}: this rate is beyond the client, not a server measurement"
        )
    if saturated:
        senders = counted(parts, "generator process", "generator processes")
        setting = settings.LOADGEN_PROCESSES.name
        saturated += f" ({senders}; more on a host with idle cores: {setting})"
    return saturated
