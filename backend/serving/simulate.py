"""A discrete-event simulation of Triton's dynamic batcher, fed by a measured latency curve.

The batching rule follows Triton core's `DynamicBatchScheduler::GetDynamicBatch`: when an
instance is free, the queue is walked oldest first; the largest preferred size reachable is sent
at once; a batch that cannot grow (the next request would pass the largest preferred size, or
max_batch_size) is sent at once; otherwise the batcher waits until the oldest request has waited
max_queue_delay_microseconds (0: send what is there), and then some: the batcher thread sleeps
on a timed condition wait for the rest of the delay and wakes up late (curve.delay_overshoot_ms,
the host's timer and scheduling latency; a request that completes a preferred size still wakes
it at once). A batch sent on the delay's expiry also comes back curve.held_wake_ms later: the
host sat idle meanwhile and its threads wake up slower. Without preferred sizes Triton uses
max_batch_size as the only preferred size (model_config_utils' normalisation). Without dynamic
batching each request runs alone, first come first served, on the first free instance.

Where each per-request cost sits, as it does in Triton (it decides which batches form):
- The way in (client send, HTTP parsing on the frontend's thread pool, the hand-over to the
  scheduler) runs in parallel for requests in flight: a pure delay (curve.overhead_ms) before the
  request joins the batcher's queue.
- The instance runs the batch: compute(b samples) from the curve, plus per request the
  backend's input hand-over and response building and sending (curve.response_cost_ms; Triton's
  compute_input and compute_output). The instance is busy for all of it, so requests that
  arrive meanwhile queue and form the next batch.
- The load generator is one event loop per process: it reads each answer and sends the next
  request one at a time (curve.request_cost_ms), after the batch is done, in completion order; a
  request's latency ends when the client has read it. A fast Server schedule is dealt out
  round-robin to several processes (scenarios.generator_processes), each its own loop.
- The client and the instances share the host's cores: an execution that starts while the
  client works, and client work done while an execution runs, take curve.host_slowdown times
  longer (only while the client really works, not while the host's budget runs ahead);
  k executions at once take compute * curve.slowdown_at(k). Factors are fixed at the
  start of each piece of work (no processor sharing afterwards).
- Triton grows a scheduled payload until an instance takes it; here a batch is formed when an
  instance is free, which is the same batch.
- preserve_ordering holds a response back until all earlier ones are out (stats only; closed-loop
  clients are released at their own completion).
- The first tenth of the requests is warm-up and left out of the statistics.
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass

import numpy as np

from backend.errors import UserError
from backend.results import LatencyStats
from backend.serving.client_model import NEVER, Client, ClosedLoop, open_sends, read_open
from backend.serving.scenarios import generator_processes
from backend.serving.types import BatchingPolicy, LatencyCurve, LoadPoint, LoadSpec, Scenario

SIMULATED_REQUESTS = 2000  # enough for a p99 from ~18 samples above it
RANKING_REQUESTS = 500  # per policy when ranking hundreds of them
WARMUP_FRACTION = 0.1


@dataclass(frozen=True)
class _Batcher:
    """The batching rule as lookup tables over the queue length, in requests."""

    max_requests: int  # max_batch_size in requests of `samples` each
    take_now: tuple[int, ...]  # requests sent at once for queue length q (index); 0 = wait
    trigger: tuple[int, ...]  # for a waiting queue of q: the length at which it is sent
    delay_ms: float

    @classmethod
    def of(cls, policy: BatchingPolicy, samples: int, overshoot_ms: float = 0.0) -> _Batcher:
        """The tables for `policy`; a held batch leaves `overshoot_ms` after its delay (the
        batcher thread's late wake-up from its timed wait)."""
        if samples > policy.max_batch_size:
            raise UserError(
                f"Requests of {samples} samples exceed max_batch_size {policy.max_batch_size}; "
                "raise the maximum batch size or send fewer samples per request."
            )
        most = policy.max_batch_size // samples
        if not policy.dynamic_batching:
            return cls(1, (0, 1, 1), (1, 1, 2), 0.0)
        preferred = set(policy.preferred_batch_sizes) or {policy.max_batch_size}
        max_preferred = max(preferred)
        delay_ms = policy.max_queue_delay_us / 1000.0
        take = [0]
        for queued in range(1, most + 2):
            reachable = min(queued, most)
            hits = [k for k in range(1, reachable + 1) if k * samples in preferred]
            best = max(hits) if hits else 0
            if not best and queued * samples > max_preferred:
                best = max(1, max_preferred // samples)
            if best:
                take.append(best)
            elif queued > most or reachable * samples >= max_preferred or delay_ms == 0:
                take.append(reachable)
            else:
                take.append(0)
        trigger = [next(q for q in range(n, most + 2) if take[q]) for n in range(most + 2)]
        late = max(0.0, overshoot_ms) if delay_ms else 0.0
        return cls(most, tuple(take), tuple(trigger), delay_ms + late)

    def decide(self, queued: int, now: float, oldest: float) -> int:
        """Requests to send now (0: wait for more or for the oldest request's delay to pass)."""
        if self.delay_ms and now >= oldest + self.delay_ms:  # the same sum as the deadline
            return min(queued, self.max_requests)
        return self.take_now[min(queued, self.max_requests + 1)]


@dataclass(frozen=True)
class _Trace:
    """What happened to every request (arrival order) and every batch."""

    arrival_ms: np.ndarray  # when each request joined the server's queue
    sent_ms: np.ndarray  # when its client sent it
    dispatch_ms: np.ndarray  # when its batch started computing
    done_ms: np.ndarray  # when its batch finished
    read_ms: np.ndarray  # when the client had read its answer: the end of its latency
    batch_requests: np.ndarray  # requests per batch


@dataclass(frozen=True)
class _Machine:
    """The hardware side: time per batch (in requests), contention, jitter draws."""

    compute: list[float]  # index k: one batch of k requests, with k responses built and sent
    slowdown: list[float]  # index k: k executions at once
    jitter: list[float]  # one multiplier per batch
    host: float  # while the client works: an execution's multiplier
    wake: float  # added to a batch sent on its delay's expiry (curve.held_wake_ms)

    @classmethod
    def of(cls, curve: LatencyCurve, batcher: _Batcher, load: LoadSpec, instances: int, count: int):
        samples = load.samples_per_request
        compute = [0.0] + [
            curve.compute_ms_at(k * samples) + k * curve.response_cost_ms
            for k in range(1, batcher.max_requests + 1)
        ]
        slowdown = [1.0] + [curve.slowdown_at(k) for k in range(1, instances + 1)]
        cv = curve.compute_jitter
        if cv > 0:
            sigma = math.sqrt(math.log1p(cv * cv))
            rng = np.random.default_rng(load.seed + 1)
            draws = rng.lognormal(-sigma * sigma / 2, sigma, count)
            # scaled to a mean of exactly 1: a heavy tail's few draws leave most of a finite
            # sample's mean below 1, which would predict a noisier configuration faster
            jitter = (draws / draws.mean()).tolist()
        else:
            jitter = [1.0] * count
        return cls(compute, slowdown, jitter, curve.host_slowdown, max(0.0, curve.held_wake_ms))


def _request_count(load: LoadSpec, requests: int | None) -> int:
    if requests is not None:
        return max(20, requests)
    if load.scenario is Scenario.OFFLINE and load.requests:
        return max(20, min(load.requests, SIMULATED_REQUESTS))
    if load.scenario is Scenario.SERVER and load.target_rps:
        return max(20, min(SIMULATED_REQUESTS, int(load.target_rps * load.duration_s)))
    return SIMULATED_REQUESTS


def _run_open(
    batcher: _Batcher, machine: _Machine, arrivals: list[float], instances: int, host: float
) -> list:
    """Open loop (Server, Offline): arrivals known up front, so one iteration per batch.

    The queue is arrivals[head:tail]; a waiting batcher jumps straight to the arrival that
    triggers a send, or to the oldest request's deadline, whichever comes first. `host` is the
    executions' multiplier for the client working beside them (its expected share of the time).
    """
    count, delay, most = len(arrivals), batcher.delay_ms, batcher.max_requests
    take_now, trigger = batcher.take_now, batcher.trigger
    compute, slowdown, jitter = machine.compute, machine.slowdown, machine.jitter
    batches: list[tuple[float, float, int]] = []
    free, running = [0.0] * instances, []
    head = tail = 0
    now = 0.0
    pop, push = heapq.heappop, heapq.heappush
    while head < count:
        now = max(now, pop(free), arrivals[head])
        tail = bisect.bisect_right(arrivals, now, tail)
        oldest, wake = arrivals[head], 0.0
        if delay and now >= oldest + delay:
            take = min(tail - head, most)
        else:
            take = take_now[min(tail - head, most + 1)]
            if not take:
                deadline = oldest + delay
                due = head + trigger[tail - head] - 1
                if due < count and arrivals[due] < deadline:
                    now = arrivals[due]
                    tail = bisect.bisect_right(arrivals, now, tail)
                    take = take_now[min(tail - head, most + 1)]
                else:
                    now, wake = deadline, machine.wake
                    tail = bisect.bisect_right(arrivals, now, tail)
                    take = min(tail - head, most)
        busy = 1
        if instances > 1:
            while running and running[0] <= now:
                pop(running)
            busy = len(running) + 1
        done = now + compute[take] * slowdown[busy] * jitter[len(batches)] * host + wake
        batches.append((now, done, take))
        head += take
        push(free, done)
        if instances > 1:
            push(running, done)
    return batches


def _run_closed(
    batcher: _Batcher, machine: _Machine, clients: int, count: int, instances: int, client: Client
) -> tuple[ClosedLoop, list]:
    """Closed loop (Concurrency, SingleStream): a client sends again once it has read its answer.

    Every future event is known: arrivals already sent, and the answers of batches running.
    """
    compute, slowdown, jitter = machine.compute, machine.slowdown, machine.jitter
    state = ClosedLoop(client, clients, count)
    batches: list[tuple[float, float, int]] = []
    free, running = [0.0] * instances, []
    head, now = 0, 0.0
    pop, push = heapq.heappop, heapq.heappush
    while head < count:
        now = max(now, pop(free))
        state.advance(now)
        while head == len(state.arrived):  # nothing queued: jump to the next event
            now = state.next_event()
            state.advance(now)
        take = batcher.decide(len(state.arrived) - head, now, state.arrived[head])
        wake = 0.0
        while not take:  # wait for the next event or for the oldest request's delay
            deadline = state.arrived[head] + batcher.delay_ms
            now = state.next_event(deadline)
            state.advance(now)
            take = batcher.decide(len(state.arrived) - head, now, state.arrived[head])
            wake = machine.wake if now >= deadline else 0.0
        while running and running[0] <= now:
            pop(running)
        busy = min(len(running) + 1, instances)
        host = machine.host if client.busy_at(now) else 1.0
        done = now + compute[take] * slowdown[busy] * jitter[len(batches)] * host + wake
        done = max(done, client.execute(now, compute[take]))
        batches.append((now, done, take))
        push(state.unread, (done, head, take))
        state.executing_until = max(state.executing_until, done)
        head += take
        push(free, done)
        push(running, done)
    state.advance(NEVER)
    return state, batches


def _run(
    curve: LatencyCurve, load: LoadSpec, policy: BatchingPolicy, count: int, senders: int
) -> _Trace:
    batcher = _Batcher.of(policy, load.samples_per_request, curve.delay_overshoot_ms)
    machine = _Machine.of(curve, batcher, load, policy.instance_count, count)
    client = Client(curve, count, load.seed, senders)
    if load.scenario in (Scenario.CONCURRENCY, Scenario.SINGLE_STREAM):
        clients = 1 if load.scenario is Scenario.SINGLE_STREAM else load.concurrency
        state, batches = _run_closed(
            batcher, machine, clients, count, policy.instance_count, client
        )
        arrived, sent, read = state.arrived[:count], state.sent[:count], state.read
    else:
        sent_at = open_sends(load, count)
        pairs = sorted((client.arrive(t), t) for t in sent_at)  # a jittered way in reorders
        arrived, sent = [a for a, _ in pairs], [t for _, t in pairs]
        span = max(arrived[-1] - arrived[0], 1e-9)
        # the client's share of the time (each sender's, when several share the schedule)
        busy = min(1.0, curve.request_cost_ms * count / span / senders)
        host = 1.0 + (curve.host_slowdown - 1.0) * busy
        batches = _run_open(batcher, machine, arrived, policy.instance_count, host)
        read = read_open(client, batches, machine.compute)[:count]
    return _trace(arrived, sent, batches, read)


def _trace(
    arrived: list[float],
    sent: list[float],
    batches: list[tuple[float, float, int]],
    read: list[float],
) -> _Trace:
    starts, ends, sizes = (np.asarray(column) for column in zip(*batches, strict=True))
    sizes = sizes.astype(np.int64)
    arrival = np.asarray(arrived)
    return _Trace(
        arrival_ms=arrival,
        sent_ms=np.asarray(sent),
        dispatch_ms=np.repeat(starts, sizes)[: arrival.size],
        done_ms=np.repeat(ends, sizes)[: arrival.size],
        read_ms=np.asarray(read),
        batch_requests=sizes,
    )


@dataclass(frozen=True)
class BatchLog:
    """The batches a replayed arrival schedule forms: what a test or a comparison checks."""

    batch_sizes: tuple[int, ...]  # samples per execution, in order
    batch_start_ms: tuple[float, ...]
    batch_done_ms: tuple[float, ...]
    queue_ms: tuple[float, ...]  # per request, arrival order


def replay(
    curve: LatencyCurve,
    policy: BatchingPolicy,
    arrivals_ms: list[float],
    *,
    samples_per_request: int = 1,
    seed: int = 0,
) -> BatchLog:
    """Run the batcher on a given schedule of queue arrivals (e.g. one a load test recorded)."""
    load = LoadSpec(Scenario.OFFLINE, samples_per_request=samples_per_request, seed=seed)
    arrivals = sorted(float(a) for a in arrivals_ms)
    batcher = _Batcher.of(policy, samples_per_request, curve.delay_overshoot_ms)
    machine = _Machine.of(curve, batcher, load, policy.instance_count, len(arrivals))
    batches = _run_open(batcher, machine, arrivals, policy.instance_count, 1.0)
    trace = _trace(arrivals, arrivals, batches, arrivals)
    return BatchLog(
        batch_sizes=tuple(size * samples_per_request for _, _, size in batches),
        batch_start_ms=tuple(start for start, _, _ in batches),
        batch_done_ms=tuple(done for _, done, _ in batches),
        queue_ms=tuple((trace.dispatch_ms - trace.arrival_ms).tolist()),
    )


def _stability(latency_ms: np.ndarray) -> tuple[bool, str]:
    """A queue that keeps growing shows as latency rising from one half of the run to the next."""
    half = latency_ms.size // 2
    first, second = float(np.mean(latency_ms[:half])), float(np.mean(latency_ms[half:]))
    if second > 1.5 * first and second - first > 1.0:
        return False, (
            f"predicted queue grows without bound (mean latency {first:.1f} -> {second:.1f} ms): "
            "the offered rate exceeds what this policy serves"
        )
    return True, "predicted steady state"


def simulate(
    curve: LatencyCurve,
    load: LoadSpec,
    policy: BatchingPolicy,
    *,
    requests: int | None = None,
    senders: int | None = None,
) -> LoadPoint:
    """Predict one load point: the same LoadPoint a measurement gives, with predicted=True.

    `senders`: the load generator's processes (a measured point's own); by default as many as
    this host's generator would use for `load`.
    """
    count = _request_count(load, requests)
    senders = senders or generator_processes(load)
    trace = _run(curve, load, policy, count, senders)
    done = trace.read_ms
    if policy.preserve_ordering:
        done = np.maximum.accumulate(np.maximum(done, trace.done_ms))
    skip = int(count * WARMUP_FRACTION)
    latency = (done - trace.sent_ms)[skip:]
    queue = (trace.dispatch_ms - trace.arrival_ms)[skip:]
    compute = (trace.done_ms - trace.dispatch_ms)[skip:]
    finished = np.sort(done)[skip:]  # responses per second over the measured window
    span_ms = float(finished[-1] - finished[0])
    achieved = (finished.size - 1) * 1000.0 / span_ms if span_ms > 0 else 0.0
    sizes, counts = np.unique(trace.batch_requests * load.samples_per_request, return_counts=True)
    if load.scenario is Scenario.OFFLINE:
        stable, note = True, "offline: every request queued at once"
    else:
        stable, note = _stability(latency)
    return LoadPoint(
        scenario=load.scenario,
        policy=policy,
        spec=load,
        achieved_rps=achieved,
        latency=LatencyStats.from_samples(latency),
        queue_ms=float(queue.mean()),
        compute_ms=float(compute.mean()),
        batch_histogram={int(s): int(c) for s, c in zip(sizes, counts, strict=True)},
        stable=stable,
        stability_note=note,
        predicted=True,
        generator_processes=senders,
    )
