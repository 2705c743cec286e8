"""Requests out and their timings back: the TritonSender every scenario sends through (a
scenarios.RequestSender), the seeded request it repeats, and one generator process's share of a
Server schedule split over several (loadgen.py deals the schedule out and gathers the records).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import numpy as np
import tritonclient.http.aio as triton_http

from backend.errors import UserError
from backend.serving.repository import TensorSpec
from backend.serving.scenarios import send_on_schedule
from backend.serving.server import ServerEndpoint
from backend.serving.types import LoadSpec

MAX_CONNECTIONS = 1024  # Server scenario: beyond this many in flight the server is long overloaded
PART_WARMUP = 2  # requests each part sends before the schedule's zero (its first connections)


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
class TritonSender:
    """Sends the same seeded request over and over and records each one (a RequestSender)."""

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


def open_client(endpoint: ServerEndpoint, spec: LoadSpec) -> triton_http.InferenceServerClient:
    """tritonclient's asyncio HTTP client with connections for the whole spec."""
    # enough connections that requests never wait for one inside the client (that wait would be
    # counted as latency): N in flight, a whole burst, or about a second of Server arrivals
    rate = min(int(spec.target_rps or 0), MAX_CONNECTIONS)
    connections = max(spec.concurrency, spec.requests or 0, rate, 64)
    return triton_http.InferenceServerClient(endpoint.http_url, conn_limit=connections)


def make_sender(
    client: triton_http.InferenceServerClient, endpoint: ServerEndpoint, spec: LoadSpec
) -> TritonSender:
    outputs = [
        triton_http.InferRequestedOutput(name, binary_data=True) for name in endpoint.outputs
    ]
    return TritonSender(client, endpoint, request_inputs(endpoint, spec), outputs)


def drive_part(
    endpoint: ServerEndpoint, spec: LoadSpec, offsets: tuple[float, ...], zero_s: float
) -> list[Record]:
    """One generator process's share of a split Server schedule (a child of the load child).

    Times are on the machine's monotonic clock (perf_counter is CLOCK_MONOTONIC on Linux, one
    clock for every process), counted from `zero_s`, so every part's records line up.
    """
    return asyncio.run(_drive_part(endpoint, spec, offsets, zero_s))


async def _drive_part(
    endpoint: ServerEndpoint, spec: LoadSpec, offsets: tuple[float, ...], zero_s: float
) -> list[Record]:
    client = open_client(endpoint, spec)
    try:
        sender = make_sender(client, endpoint, spec)
        sender.start = time.perf_counter()
        for _ in range(PART_WARMUP):
            await sender.send()
        sender.records.clear()
        await asyncio.sleep(max(0.0, zero_s - time.perf_counter()))
        sender.start = zero_s
        await send_on_schedule(sender, offsets)
        return sender.records
    finally:
        await client.close()
