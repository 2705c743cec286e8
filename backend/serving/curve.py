"""The measured latency-vs-batch curve that feeds the batcher simulation.

One request at a time, each carrying a whole batch of b samples, so every execution Triton runs
has exactly that size; Triton's statistics, read after each request, give that execution's
compute time (its own clock, not the client's). The per-request overhead is what the client saw at
batch 1 beyond Triton's queue and compute time: HTTP, (de)serialisation, the Python-backend hop.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import tritonclient.http.aio as triton_http

from backend.errors import UserError
from backend.launch.children import run_in_child
from backend.runtimeenvs import DEFAULT
from backend.serving.sender import request_inputs
from backend.serving.server import ServerEndpoint, serve
from backend.serving.types import BatchingPolicy, LatencyCurve, LoadSpec, Scenario, ServingProvider

WARMUP_PER_SIZE = 3
STATS_TRIES = 50


def _batch_ns(stats: dict, size: int) -> tuple[int, int]:
    """(executions, compute ns) of batch size `size` so far."""
    for batch in stats["batch_stats"]:
        if int(batch["batch_size"]) == size:
            return int(batch["compute_infer"]["count"]), int(batch["compute_infer"]["ns"])
    return 0, 0


async def _stats(client: triton_http.InferenceServerClient, endpoint: ServerEndpoint) -> dict:
    return (await client.get_inference_statistics(endpoint.model))["model_stats"][0]


async def _after(
    client: triton_http.InferenceServerClient,
    endpoint: ServerEndpoint,
    before: dict,
    size: int,
    expected: int = 1,
) -> dict:
    """Statistics once the `expected` new executions are recorded (Triton records one just
    after it answers, so the first read may not show it yet)."""
    executions = _batch_ns(before, size)[0]
    for _ in range(STATS_TRIES):
        after = await _stats(client, endpoint)
        done = _batch_ns(after, size)[0] - executions
        if done == expected:
            return after
        if done > expected:
            break
        await asyncio.sleep(0.002)
    raise UserError(
        "Another client used the server while its latency curve was measured; "
        "measure on a server of its own."
    )


async def _one_size(
    client: triton_http.InferenceServerClient,
    endpoint: ServerEndpoint,
    size: int,
    requests: int,
    seed: int,
) -> tuple[list[float], list[float], list[float]]:
    """(compute ms, end-to-end ms, queue ms) of each request of `size` samples."""
    samples = size if endpoint.max_batch_size else 1
    spec = LoadSpec(Scenario.SINGLE_STREAM, samples_per_request=samples, seed=seed)
    inputs = request_inputs(endpoint, spec)
    stats = await _stats(client, endpoint)
    for _ in range(WARMUP_PER_SIZE):
        await client.infer(endpoint.model, inputs)
    stats = await _after(client, endpoint, stats, size, WARMUP_PER_SIZE)
    compute, e2e, queue = [], [], []
    for _ in range(requests):
        started = time.perf_counter()
        await client.infer(endpoint.model, inputs)
        e2e.append(1000 * (time.perf_counter() - started))
        after = await _after(client, endpoint, stats, size)
        compute.append((_batch_ns(after, size)[1] - _batch_ns(stats, size)[1]) / 1e6)
        q0, q1 = stats["inference_stats"]["queue"], after["inference_stats"]["queue"]
        queue.append((int(q1["ns"]) - int(q0["ns"])) / 1e6)
        stats = after
    return compute, e2e, queue


def _robust_cv(samples: list[float]) -> float:
    """Coefficient of variation from the interquartile range (IQR / 1.349 is sigma for a
    normal law): one slow outlier, a page fault or a preemption, does not dominate it."""
    low, _, high = statistics.quantiles(samples, n=4)
    median = statistics.median(samples)
    return (high - low) / 1.349 / median if median else 0.0


async def _measure(
    endpoint: ServerEndpoint, sizes: Sequence[int], requests: int, seed: int
) -> LatencyCurve:
    client = triton_http.InferenceServerClient(endpoint.http_url)
    try:
        medians, jitters, overhead = [], [], 0.0
        for size in sizes:
            compute, e2e, queue = await _one_size(client, endpoint, size, requests, seed)
            medians.append(statistics.median(compute))
            jitters.append(_robust_cv(compute))
            if size == sizes[0]:
                overhead = max(statistics.median(e2e) - statistics.median(queue) - medians[-1], 0.0)
        return LatencyCurve(
            batch_sizes=tuple(sizes),
            compute_ms=tuple(medians),
            overhead_ms=overhead,
            compute_jitter=statistics.fmean(jitters),
        )
    finally:
        await client.close()


def curve_sizes(batch_sizes: Sequence[int]) -> list[int]:
    """The sizes a curve measures, ascending, each once; refused in one sentence before any
    server starts (a size below 1 was found by the child, after Triton had started)."""
    sizes = sorted(set(batch_sizes))
    if not sizes or sizes[0] < 1:
        raise UserError("A latency curve needs batch sizes of 1 or more, e.g. 1,2,4,8.")
    return sizes


def measure_latency_curve(
    endpoint: ServerEndpoint,
    batch_sizes: Sequence[int] = (1, 2, 4, 8, 16),
    *,
    requests_per_size: int = 30,
    seed: int = 0,
) -> LatencyCurve:
    """Median compute ms per batch size on one instance, and the per-request overhead at the
    smallest size, from a running server that no other client uses (one instance, so the
    executions are serial). A fixed-batch server runs one request per execution: its curve has
    the one size 1."""
    sizes = curve_sizes(batch_sizes)
    if not endpoint.max_batch_size:
        sizes = [1]
    elif sizes[-1] > endpoint.max_batch_size:
        raise UserError(
            f"Batch size {sizes[-1]} exceeds the server's maximum batch size "
            f"{endpoint.max_batch_size}; serve with a larger maximum or measure smaller sizes."
        )
    return asyncio.run(_measure(endpoint, sizes, requests_per_size, seed))


def measure_model_curve(
    model_path: Path,
    batch_sizes: Sequence[int] = (1, 2, 4, 8, 16),
    *,
    requests_per_size: int = 30,
    dims: dict[str, int] | None = None,
    intra_op_threads: int | None = None,
    provider: ServingProvider = ServingProvider.CPU,
    runtime_env: str = DEFAULT,
) -> tuple[LatencyCurve, str]:
    """Serve the file on one instance without dynamic batching (client batches only) and measure
    its curve from a child process started by the one launcher; with what ran the model
    ("onnxruntime 1.31.1 (ort-1.31)")."""
    batch_sizes = curve_sizes(batch_sizes)
    policy = BatchingPolicy(max_batch_size=max(batch_sizes), dynamic_batching=False)
    with serve(
        model_path,
        policy,
        dims=dims,
        intra_op_threads=intra_op_threads,
        provider=provider,
        runtime_env=runtime_env,
    ) as server:
        ran = server.endpoint.runtime_label
        outcome = run_in_child(
            measure_latency_curve,
            server.endpoint,
            tuple(batch_sizes),
            requests_per_size=requests_per_size,
            timeout_s=60 + 2 * requests_per_size * len(batch_sizes),
            what="The latency-curve measurement",
        )
    return outcome.value_or_raise("The latency-curve measurement"), ran
