"""The serving contract shared by the load generator, the real server and the simulation.

A measured point and a predicted point are the same `LoadPoint`, so prediction error is a
subtraction and charts draw both from one type.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from backend.errors import UserError
from backend.results import EnergyReport, LatencyStats

# the way in and out's spread is a lognormal's of at most this sigma (its p99 10.6x its mean):
# past it, the tail is not the way's noise; a spread at the cap says so where it is printed
MAX_SIGMA = 1.5
MAX_OVERHEAD_JITTER = math.sqrt(math.expm1(MAX_SIGMA * MAX_SIGMA))

# a CPU point's energy note (loadgen): about its J/request column, not about what the server did
CPU_ENERGY_NOTE = (
    "J/request counts every CPU package of this host, the load generator's own work included"
)


class Scenario(StrEnum):
    """MLPerf LoadGen's scenario names, plus perf_analyzer's closed-loop concurrency sweep."""

    SINGLE_STREAM = "single_stream"  # one request at a time, the next when it returns
    OFFLINE = "offline"  # everything at once: maximum throughput
    SERVER = "server"  # Poisson arrivals at a target rate; p99 against a bound
    CONCURRENCY = "concurrency"  # N requests always in flight (perf_analyzer)


class ServingProvider(StrEnum):
    """The ONNX Runtime execution provider the served model runs on; cuda needs a GPU host."""

    CPU = "cpu"  # instance_group KIND_CPU
    CUDA = "cuda"  # instance_group KIND_GPU on GPU 0; never a silent CPU fallback


@dataclass(frozen=True)
class BatchingPolicy:
    """What goes into Triton's config.pbtxt: dynamic_batching and instance_group."""

    max_batch_size: int
    dynamic_batching: bool = True
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    instance_count: int = 1
    preserve_ordering: bool = False

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise UserError("The maximum batch size must be at least 1.")
        if self.instance_count < 1:
            raise UserError("A served model needs at least one instance.")
        if self.max_queue_delay_us < 0:
            raise UserError("The maximum queue delay cannot be negative; use 0 or more.")
        bad = [size for size in self.preferred_batch_sizes if not 1 <= size <= self.max_batch_size]
        if bad:
            raise UserError(
                f"Preferred batch sizes {bad} lie outside 1..{self.max_batch_size}; "
                "choose sizes up to the maximum batch size."
            )
        if not self.dynamic_batching and (self.preferred_batch_sizes or self.max_queue_delay_us):
            raise UserError(
                "Preferred batch sizes and a queue delay need dynamic batching; "
                "turn it on or clear them."
            )

    @property
    def label(self) -> str:
        if not self.dynamic_batching:
            return f"no batching x{self.instance_count}"
        preferred = ",".join(map(str, self.preferred_batch_sizes))
        return (
            f"max {self.max_batch_size}, delay {self.max_queue_delay_us} us, "
            + (f"preferred {preferred}, " if preferred else "")
            + f"x{self.instance_count}"
        )


def shortest_queue_delay_us(policies: Iterable[BatchingPolicy]) -> int:
    """The shortest non-zero max_queue_delay among the policies (0: none holds batches): the
    delay a cost measurement probes to learn how late a held batch leaves."""
    return min((p.max_queue_delay_us for p in policies if p.max_queue_delay_us), default=0)


@dataclass(frozen=True)
class LoadSpec:
    """One load point to generate. Fixed seed: the Server arrival schedule is reproducible."""

    scenario: Scenario
    duration_s: float = 5.0
    target_rps: float | None = None  # SERVER only
    concurrency: int = 1  # CONCURRENCY only (SINGLE_STREAM is concurrency 1)
    requests: int | None = None  # OFFLINE: how many requests are sent at once
    samples_per_request: int = 1  # batch dimension of each client request
    seed: int = 0

    def __post_init__(self) -> None:
        if self.duration_s <= 0:
            raise UserError("A load test needs a positive duration in seconds.")
        if self.scenario is Scenario.SERVER and not (self.target_rps and self.target_rps > 0):
            raise UserError("The Server scenario needs a target rate above 0 requests per second.")
        if self.concurrency < 1:
            raise UserError("Concurrency must be at least 1 request in flight.")
        if self.samples_per_request < 1:
            raise UserError("Each request must carry at least one sample.")
        if self.requests is not None and self.requests < 1:
            raise UserError(f"An offline burst needs at least 1 request, not {self.requests}.")
        if self.seed < 0:  # numpy's generators take none (a ValueError deep in the run)
            raise UserError(f"The seed must be 0 or more, not {self.seed}.")


@dataclass(frozen=True)
class LatencyCurve:
    """Measured compute time per batch size on one instance, plus the per-request overhead.

    The simulation's only inputs from the hardware: interpolation between measured sizes.
    """

    batch_sizes: tuple[int, ...]
    compute_ms: tuple[float, ...]  # median compute time of one batch of that size
    overhead_ms: float = 0.0  # per request outside compute (network, (de)serialisation)
    compute_jitter: float = 0.0  # coefficient of variation of compute time, from the samples
    # Compute-time multiplier when k executions run at once (index k-1; 1.0 for k=1). Instances on
    # one CPU share its cores. Empty means not measured: k executions at once are taken to share
    # one set of cores (each k times slower, so more instances add no throughput), since a
    # session that already uses every core cannot be assumed to scale; independent hardware says
    # so with measured factors (1.0, 1.0). Past the last measured k the last step's growth
    # continues linearly.
    instance_slowdown: tuple[float, ...] = ()
    # Per request, the load generator's own serial work (its one event loop builds the request
    # and reads the answer), paid after the batch is done: caps throughput at 1000 / this.
    request_cost_ms: float = 0.0
    # Coefficient of variation of the overhead (lognormal, mean overhead_ms): the host's
    # scheduling noise that a shared CPU adds to every request's way in and out.
    overhead_jitter: float = 0.0
    # Per request in a batch, on the instance: Triton hands each request's inputs over and builds
    # and sends each response (backend output, frontend serialisation), so a dynamic batch of b
    # one-sample requests takes compute(b) + b * response_cost_ms.
    response_cost_ms: float = 0.0
    # Multiplier on an execution, and on the client's per-request work, while the other runs:
    # the load generator and the server share the host's cores. 1.0: separate hardware.
    host_slowdown: float = 1.0
    # The host's CPU as a budget: CPU ms per request outside the executions (generator, HTTP
    # frontend, backend hop) and the cores the generator and the server get; executions spend
    # their own time from it too. Saturated, the host serves host_cores / CPU per request.
    # 0 cores: no budget (separate hardware, or not measured).
    host_cpu_ms: float = 0.0
    host_cores: float = 0.0
    # How late Triton's batcher sends a batch held for max_queue_delay: its thread sleeps on a
    # timed condition wait until the oldest request's delay has passed, and wakes up late by the
    # host's timer and scheduling latency. Measured under a delay (Triton's queue statistic).
    delay_overshoot_ms: float = 0.0
    # Extra time a batch sent when its delay ran out takes to come back, beyond the execution:
    # the host sat idle meanwhile, and its threads (instance, frontend, the client's loop) wake
    # up slower than when requests follow back to back. Measured under a delay.
    held_wake_ms: float = 0.0

    def __post_init__(self) -> None:
        if not self.batch_sizes or len(self.batch_sizes) != len(self.compute_ms):
            raise UserError("A latency curve needs one compute time per measured batch size.")
        if list(self.batch_sizes) != sorted(set(self.batch_sizes)):
            raise UserError("A latency curve's batch sizes must be distinct and ascending.")
        if self.host_slowdown <= 0:
            raise UserError("The host slowdown must be positive; 1.0 means no slowdown.")
        if any(factor <= 0 for factor in self.instance_slowdown):
            raise UserError("Instance slowdown factors must be positive; 1.0 means no slowdown.")

    @property
    def _capped(self) -> str:
        """The spread at the model's cap is no measured figure: the tail measured was longer."""
        if self.overhead_jitter < MAX_OVERHEAD_JITTER - 1e-9:
            return ""
        return ", the most the model takes: its p99 was further out"

    @property
    def summary(self) -> str:
        """The simulation's inputs in one line, as captions, the CLI and the bench state them."""
        compute = ", ".join(
            f"{ms:.2f} ms at {b}" for b, ms in zip(self.batch_sizes, self.compute_ms, strict=True)
        )
        return (
            f"compute {compute} · way in and out {self.overhead_ms:.2f} ms (spread "
            f"{self.overhead_jitter:.2f}{self._capped}; +{self.response_cost_ms:.2f} ms per "
            "request on the "
            f"instance) · generator CPU {self.request_cost_ms:.2f} ms per request · host "
            f"slowdown {self.host_slowdown:.2f}x · {self._instances_words} · "
            f"host {self.host_cpu_ms:.2f} ms CPU per request on {self.host_cores:.2f} cores · "
            f"a batch held for the queue delay leaves {self.delay_overshoot_ms:.2f} ms after "
            f"the delay and comes back {self.held_wake_ms:.2f} ms slower than one sent at once"
        )

    @property
    def _instances_words(self) -> str:
        if not self.instances_measured:
            return "two instances not measured (taken to add no throughput)"
        return f"two instances {self.slowdown_at(2):.2f}x"

    @property
    def instances_measured(self) -> bool:
        """Whether how executions at once slow each other was measured (else: no gain assumed)."""
        return bool(self.instance_slowdown)

    @property
    def largest_batch(self) -> int:
        """The largest batch size measured: beyond it compute_ms_at extrapolates."""
        return self.batch_sizes[-1]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LatencyCurve:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})

    def slowdown_at(self, running: int) -> float:
        """Compute-time multiplier with `running` executions at once (this one included); not
        measured, `running` itself: they share the cores and together go no faster than one."""
        factors = self.instance_slowdown
        if running <= 1:
            return 1.0
        if not factors:
            return float(running)
        if running <= len(factors):
            return factors[running - 1]
        step = factors[-1] - (factors[-2] if len(factors) > 1 else 1.0)
        return factors[-1] + step * (running - len(factors))

    def compute_ms_at(self, batch: int) -> float:
        """Linear interpolation between measured sizes; linear extrapolation past the last one."""
        sizes, times = self.batch_sizes, self.compute_ms
        if batch <= sizes[0] or len(sizes) == 1:
            return times[0] * (batch / sizes[0] if batch > sizes[0] else 1.0)
        for index in range(1, len(sizes)):
            low, high = sizes[index - 1], sizes[index]
            if batch <= high:
                t_low, t_high = times[index - 1], times[index]
                return t_low + (t_high - t_low) * (batch - low) / (high - low)
        slope = (times[-1] - times[-2]) / (sizes[-1] - sizes[-2])
        return times[-1] + slope * (batch - sizes[-1])


def runtime_label(onnxruntime: str, runtime_env: str) -> str:
    """'onnxruntime 1.31.1 (ort-1.31)': what ran the served model ('' where not recorded)."""
    if not onnxruntime:
        return ""
    return f"onnxruntime {onnxruntime} ({runtime_env or 'default'})"


@dataclass(frozen=True)
class LoadPoint:
    """One measured (or predicted) load point."""

    scenario: Scenario
    policy: BatchingPolicy
    spec: LoadSpec
    achieved_rps: float
    latency: LatencyStats  # end to end per request, as the client saw it
    queue_ms: float  # mean time waiting in the server's queue
    compute_ms: float  # mean time in compute (per request's batch)
    batch_histogram: dict[int, int]  # batch size the server really formed -> executions
    stable: bool
    stability_note: str
    predicted: bool = False
    generator_saturated: bool = False  # the client could not keep up: not the server's latency
    errors: int = 0
    arrival_schedule_s: tuple[float, ...] = ()  # SERVER: the offsets actually used
    server_metrics: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what the server did differently, e.g. no dynamic batching
    provider: ServingProvider = ServingProvider.CPU  # what was asked for
    session_providers: tuple[str, ...] = ()  # what ONNX Runtime's session really used, in order
    generator_processes: int = 1  # processes that sent the requests (a fast Server point splits)
    session_options: tuple[str, ...] = ()  # the session's options in effect, "key=value"
    # J per request over the point's window and idle power apart, or why not measurable here
    energy: EnergyReport | None = None
    # the runtime environment asked for (backend/runtimeenvs.py) and the onnxruntime version the
    # served model really loaded; "" on points stored before they were recorded, and predictions
    runtime_env: str = ""
    onnxruntime: str = ""

    @property
    def runtime_label(self) -> str:
        return runtime_label(self.onnxruntime, self.runtime_env)

    @property
    def mean_batch(self) -> float:
        executions = sum(self.batch_histogram.values())
        if not executions:
            return 0.0
        return sum(size * count for size, count in self.batch_histogram.items()) / executions

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["batch_histogram"] = {str(k): v for k, v in self.batch_histogram.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadPoint:
        spec = dict(data["spec"])
        spec["scenario"] = Scenario(spec["scenario"])
        policy = dict(data["policy"])
        policy["preferred_batch_sizes"] = tuple(policy["preferred_batch_sizes"])
        return cls(
            **{
                **data,
                "scenario": Scenario(data["scenario"]),
                "policy": BatchingPolicy(**policy),
                "spec": LoadSpec(**spec),
                "latency": LatencyStats(**data["latency"]),
                "batch_histogram": {int(k): v for k, v in data["batch_histogram"].items()},
                "arrival_schedule_s": tuple(data.get("arrival_schedule_s", ())),
                "notes": tuple(data.get("notes", ())),
                "provider": ServingProvider(data.get("provider", ServingProvider.CPU)),
                "session_providers": tuple(data.get("session_providers", ())),
                "session_options": tuple(data.get("session_options", ())),
                "energy": EnergyReport(**data["energy"]) if data.get("energy") else None,
            }
        )
