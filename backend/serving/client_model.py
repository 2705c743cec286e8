"""The load generator's side of the batcher simulation: when requests reach the queue, when
answers are read.

Like tritonclient's asyncio client, the generator is one event loop: the way in is a delay that
requests in flight pay side by side, reading an answer and sending the next request is serial
work, done in completion order (see serving.simulate for where every cost sits).
"""

from __future__ import annotations

import bisect
import heapq
import math

import numpy as np

from backend.serving.types import LatencyCurve, LoadSpec, Scenario

NEVER = math.inf


def open_sends(load: LoadSpec, count: int) -> list[float]:
    """Send times of an open loop: Poisson at the target rate (seeded), or all at once."""
    if load.scenario is Scenario.OFFLINE:
        return [0.0] * count
    rng = np.random.default_rng(load.seed)
    gaps = rng.exponential(1000.0 / float(load.target_rps or 1.0), count)
    gaps[0] = 0.0
    return np.cumsum(gaps).tolist()


class Client:
    """The load generator and the host's CPU budget.

    The way in is a delay (overhead, lognormal around its mean when the curve has
    overhead_jitter). Reading an answer is serial work (one event loop per generator process; a
    Server schedule is dealt out round-robin to them), first done first read,
    host_slowdown times longer while an execution runs. With a CPU budget, a virtual host clock
    advances by every request's and every execution's CPU over the cores: a read never ends
    before the clock allows, so a saturated host paces answers at its capacity while a lone
    request still takes only the generator's own time.
    """

    def __init__(self, curve: LatencyCurve, count: int, seed: int, senders: int = 1) -> None:
        self.cost, self.host = curve.request_cost_ms, curve.host_slowdown
        self.cores = curve.host_cores
        self.per_request = curve.host_cpu_ms / self.cores if self.cores else 0.0
        self.clock, self.drawn = 0.0, 0
        self.loops = [0.0] * senders  # when each generator process's event loop is next free
        cv = curve.overhead_jitter
        if cv > 0 and curve.overhead_ms > 0:
            sigma = math.sqrt(math.log1p(cv * cv))
            rng = np.random.default_rng(seed + 2)
            draws = rng.lognormal(-sigma * sigma / 2, sigma, count) * curve.overhead_ms
            self.overheads = draws.tolist()
        else:
            self.overheads = [curve.overhead_ms] * count

    def arrive(self, sent: float) -> float:
        """When a request sent at `sent` joins the batcher's queue."""
        at = sent + self.overheads[self.drawn % len(self.overheads)]
        self.drawn += 1
        return at

    def busy_at(self, now: float) -> bool:
        return self.loops[0] > now

    def execute(self, start: float, cpu_ms: float) -> float:
        """An execution spends `cpu_ms` of the host's budget from `start`: the earliest it can
        end (the host's clock then; `start` without a budget)."""
        if not self.cores:
            return start
        self.clock = max(self.clock, start) + cpu_ms / self.cores
        return self.clock

    def read(self, done: float, executing_until: float, loop: int = 0) -> float:
        """When an answer done at `done` has been read by its sender's event loop (executions
        end by `executing_until`)."""
        at = max(done, self.loops[loop])
        own = self.cost * (self.host if executing_until > at else 1.0)
        free = at + own
        if self.cores:
            self.clock = max(self.clock, done) + self.per_request
            free = max(free, self.clock - max(self.per_request - own, 0.0))
        self.loops[loop] = free
        return free


def read_open(
    client: Client, batches: list[tuple[float, float, int]], cpu_ms: list[float]
) -> list[float]:
    """The client reads the answers of an open loop in completion order (arrival order kept);
    cpu_ms[k] is what an execution of k requests spends of the host's budget."""
    starts = [start for start, _, _ in batches]
    ends = np.maximum.accumulate([done for _, done, _ in batches]).tolist()
    order = sorted(range(len(batches)), key=lambda i: batches[i][1])
    first = np.concatenate([[0], np.cumsum([size for _, _, size in batches])]).tolist()
    read = [0.0] * int(first[-1])
    for index in order:
        start, done, size = batches[index]
        client.execute(start, cpu_ms[size])
        for request in range(int(first[index]), int(first[index]) + size):
            loop = request % len(client.loops)  # the schedule is dealt out round-robin
            free = client.loops[loop]
            latest = bisect.bisect_right(starts, free if free > done else done)
            read[request] = client.read(done, ends[latest - 1] if latest else 0.0, loop)
    return read


class ClosedLoop:
    """Closed-loop state: requests in flight, the queue, answers the client has yet to read."""

    def __init__(self, client: Client, clients: int, count: int) -> None:
        self.client, self.count = client, count
        self.incoming = [(client.arrive(0.0), 0.0) for _ in range(min(clients, count))]
        self.issued = len(self.incoming)
        self.arrived: list[float] = []
        self.sent: list[float] = []
        self.read = [0.0] * count
        self.unread: list[tuple[float, int, int]] = []  # (done, first request, requests)
        self.executing_until = 0.0

    def advance(self, now: float) -> None:
        """The client reads every answer done by `now` (in completion order: later batches
        finish after `now`), sends the next requests; arrivals by `now` join the queue."""
        pop, push = heapq.heappop, heapq.heappush
        while self.unread and self.unread[0][0] <= now:
            done, first, size = pop(self.unread)
            for request in range(first, first + size):
                at = self.client.read(done, self.executing_until)
                if request < self.count:
                    self.read[request] = at
                if self.issued < self.count:
                    push(self.incoming, (self.client.arrive(at), at))
                    self.issued += 1
        while self.incoming and self.incoming[0][0] <= now:
            arrival, sent_at = pop(self.incoming)
            self.arrived.append(arrival)
            self.sent.append(sent_at)

    def next_event(self, deadline: float = NEVER) -> float:
        """The next arrival, answer done, or the oldest request's deadline."""
        arrival = self.incoming[0][0] if self.incoming else NEVER
        answer = self.unread[0][0] if self.unread else NEVER
        return min(arrival, answer, deadline)
