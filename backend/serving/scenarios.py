"""The load scenarios, one small class each, registered by name in SCENARIOS.

Each drives a `RequestSender` (sender.TritonSender, llm_loadgen.LlmSender) that sends one request
and records it; a scenario only decides when requests go out: one at a time, N in flight, a
burst, or on a Poisson schedule.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Sequence
from typing import Protocol

import settings
from backend.serving.types import LoadSpec, Scenario

OFFLINE_DEFAULT_REQUESTS = 64
# Server: the rate one asyncio generator process keeps on schedule. On the H200 host's 16 cores one
# process fell behind (p99 send lag past 5 ms) from about 575 req/s while 14 cores sat idle
# (bench/results/serving_prediction_h200host.txt); past this rate the arrivals are dealt out.
RPS_PER_GENERATOR = 300.0


class RequestSender(Protocol):
    """Sends requests to the server and records each one's timing: sender.TritonSender (one
    inference request) and llm_loadgen.LlmSender (one streamed generation) implement it."""

    def now(self) -> float:
        """Seconds since the measurement started."""
        ...

    async def send(self, scheduled_s: float | None = None, burst: int | None = None) -> None:
        """Send one request and wait for its answer; scheduled_s is when it should have left."""
        ...


class LoadScenario(Protocol):
    """When requests go out; returns the arrival schedule it used (empty when closed loop)."""

    async def drive(self, sender: RequestSender, spec: LoadSpec) -> tuple[float, ...]: ...


async def _closed_loop(sender: RequestSender, duration_s: float, in_flight: int) -> None:
    async def one_client() -> None:
        while sender.now() < duration_s:
            await sender.send()

    await asyncio.gather(*(one_client() for _ in range(in_flight)))


class SingleStream:
    """One request at a time; the next leaves when the previous returns (MLPerf SingleStream)."""

    async def drive(self, sender: RequestSender, spec: LoadSpec) -> tuple[float, ...]:
        await _closed_loop(sender, spec.duration_s, 1)
        return ()


class Concurrency:
    """N requests always in flight (perf_analyzer's --concurrency-range)."""

    async def drive(self, sender: RequestSender, spec: LoadSpec) -> tuple[float, ...]:
        await _closed_loop(sender, spec.duration_s, spec.concurrency)
        return ()


class Offline:
    """Bursts of `requests` sent at once, one after another until the duration is spent
    (MLPerf Offline: maximum throughput); each burst is one measurement window."""

    async def drive(self, sender: RequestSender, spec: LoadSpec) -> tuple[float, ...]:
        count = spec.requests or OFFLINE_DEFAULT_REQUESTS
        burst = 0
        while burst == 0 or sender.now() < spec.duration_s:
            await asyncio.gather(*(sender.send(burst=burst) for _ in range(count)))
            burst += 1
        return ()


def poisson_schedule(rate_rps: float, duration_s: float, seed: int) -> tuple[float, ...]:
    """Arrival offsets in seconds: exponential gaps at `rate_rps`, reproducible from `seed`."""
    import numpy as np  # here: the CLI's parser reads OFFLINE_DEFAULT_REQUESTS

    rng = np.random.default_rng(seed)
    expected = int(rate_rps * duration_s * 1.5) + 16
    gaps = rng.exponential(1.0 / rate_rps, size=expected)
    offsets = np.cumsum(gaps)
    while offsets[-1] < duration_s:  # rare: draw more from the same generator
        more = np.cumsum(rng.exponential(1.0 / rate_rps, size=expected)) + offsets[-1]
        offsets = np.concatenate([offsets, more])
    return tuple(float(t) for t in offsets[offsets < duration_s])


def generator_processes(spec: LoadSpec) -> int:
    """How many processes send a point's requests: a Server point past one process's rate
    splits its schedule, up to the setting's limit (by default half the cores less one)."""
    if spec.scenario is not Scenario.SERVER or spec.target_rps is None:
        return 1
    limit = settings.LOADGEN_PROCESSES.get() or (os.cpu_count() or 2) // 2 - 1
    return max(1, min(math.ceil(spec.target_rps / RPS_PER_GENERATOR), limit))


def arrival_schedule(spec: LoadSpec) -> tuple[float, ...]:
    """A Server spec's arrival offsets, the same whichever process sends them."""
    assert spec.target_rps is not None  # LoadSpec checks it for SERVER
    return poisson_schedule(spec.target_rps, spec.duration_s, spec.seed)


# A request due this long ago: the client is far past its limit, and sending the rest of the
# schedule would only time the client (a rate no process can send once ran past the child's
# time limit and failed the whole study). The point is saturated by its lag either way.
GIVE_UP_LAG_S = 1.0


async def send_on_schedule(sender: RequestSender, schedule: Sequence[float]) -> int:
    """Open loop: each request leaves at its offset whether or not earlier ones have returned;
    none once the client is GIVE_UP_LAG_S behind. Returns how many were sent (in order)."""
    tasks = []
    for offset in schedule:
        delay = offset - sender.now()
        if delay < -GIVE_UP_LAG_S:
            break
        if delay > 0.0005:
            await asyncio.sleep(delay)
        elif delay > 0:
            _spin_until(sender, offset)
        else:  # late: let the requests already due leave first, so the lag is the client's
            await asyncio.sleep(0)
        tasks.append(asyncio.ensure_future(sender.send(scheduled_s=offset)))
    await asyncio.gather(*tasks)
    return len(tasks)


class Server:
    """Poisson arrivals at the target rate, open loop: a request leaves on schedule whether or
    not earlier ones have returned (MLPerf Server). Past one process's rate, loadgen.py deals
    the same schedule out to several processes."""

    async def drive(self, sender: RequestSender, spec: LoadSpec) -> tuple[float, ...]:
        schedule = arrival_schedule(spec)
        return schedule[: await send_on_schedule(sender, schedule)]


def _spin_until(sender: RequestSender, offset: float) -> None:
    """asyncio.sleep is ~1 ms coarse; the last half millisecond is waited for by spinning."""
    while sender.now() < offset:
        time.sleep(0)


SCENARIOS: dict[Scenario, LoadScenario] = {
    Scenario.SINGLE_STREAM: SingleStream(),
    Scenario.OFFLINE: Offline(),
    Scenario.SERVER: Server(),
    Scenario.CONCURRENCY: Concurrency(),
}
