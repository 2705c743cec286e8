"""Typed results of one configuration; stored as JSON payload plus a few indexed columns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from backend.energy.report import EnergyReport
from backend.knobs.serialize import from_json, to_json
from backend.specs import Configuration, Precision
from storage.states import ResultStatus

if TYPE_CHECKING:  # numpy is imported where samples are summarized: the CLI's parser reads these
    import numpy as np

    from storage.repo.results import ResultRow

__all__ = [
    "AccuracyReport",
    "ConfigurationResult",
    "EnergyReport",
    "EvaluationReport",
    "LatencyStats",
    "ResultStatus",
    "StoredResult",
    "fp32_baseline",
    "speeds_disagree",
]


@dataclass(frozen=True)
class LatencyStats:
    """Milliseconds per inference call (one call processes one batch)."""

    count: int
    mean: float
    std: float
    min: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float

    @classmethod
    def from_samples(cls, samples_ms: list[float] | np.ndarray) -> LatencyStats:
        import numpy as np

        data = np.asarray(samples_ms, dtype=np.float64)
        if data.size == 0:
            raise ValueError("no latency samples")
        p50, p90, p95, p99 = np.percentile(data, [50, 90, 95, 99])
        return cls(
            count=int(data.size),
            mean=float(data.mean()),
            std=float(data.std(ddof=1)) if data.size > 1 else 0.0,
            min=float(data.min()),
            p50=float(p50),
            p90=float(p90),
            p95=float(p95),
            p99=float(p99),
            max=float(data.max()),
        )


@dataclass(frozen=True)
class AccuracyReport:
    """Agreement of a configuration's outputs with the FP32 reference on the same inputs."""

    max_abs_error: float
    mean_rel_error: float
    cosine_similarity: float
    top1_agreement: float | None = None
    compared_outputs: int = 0
    samples: int = 0
    # values that are NaN (or infinite) in this configuration's outputs where FP32's are finite;
    # the other figures are computed over the positions where both are finite
    nan_values: int = 0
    inf_values: int = 0
    finite_reference_values: int = 0  # output values compared: those FP32 gives as finite
    top1_rows: int = 0  # the rows top1_agreement is over (class-score outputs x samples)
    # the widest gap between FP32's top two scores among the rows whose class changed: a
    # change within a near tie, where this is smaller than the error, says little
    top1_flip_margin: float | None = None


@dataclass(frozen=True)
class EvaluationReport:
    """Task accuracy on the user's own evaluation set (backend.engine.evaluation).

    top1_accuracy is against the set's labels (None when it has none); agreement is with the
    FP32 reference on the same inputs, so both numbers sit side by side.
    """

    set_sha256: str
    samples: int
    labelled: bool
    top1_accuracy: float | None = None
    fp32_top1_accuracy: float | None = None
    top1_agreement: float | None = None
    cosine_similarity: float | None = None


# environment keys naming files a configuration's child produced: the worker stores them
PRODUCED_KEYS = ("optimized_path", "ort_optimized_path", "profile_path")


@dataclass
class ConfigurationResult:
    """Everything measured for one configuration, or why it could not be."""

    config_key: str
    configuration: Configuration  # written and read by the one serializer, nested
    status: ResultStatus
    error: str | None = None
    providers_requested: list[str] = field(default_factory=list)
    providers_used: list[str] = field(default_factory=list)
    session_create_ms: float | None = None
    first_inference_ms: float | None = None
    latency: LatencyStats | None = None
    throughput: float | None = None  # samples (batch items) per second
    stable: bool | None = None
    windows: list[float] = field(default_factory=list)  # p50 per window, ms
    measure_seconds: float | None = None
    peak_rss_mb: float | None = None
    gpu_memory_mb: float | None = None
    model_size_bytes: int | None = None
    optimized_sha256: str | None = None
    node_count_before: int | None = None
    node_count_after: int | None = None
    accuracy: AccuracyReport | None = None
    steps: list[str] = field(default_factory=list)  # what was done to build the variant
    notes: list[str] = field(default_factory=list)  # plain "why" lines and warnings for the user
    environment: dict[str, Any] = field(default_factory=dict)
    telemetry: dict[str, Any] = field(default_factory=dict)
    # what the runtime reports it really ran (execution precision, devices, streams...), read back
    runtime_facts: dict[str, Any] = field(default_factory=dict)
    layer_profile: list[dict[str, Any]] = field(default_factory=list)  # per-layer counters
    samples_ms: list[float] = field(default_factory=list)
    peak_rss_scope: str | None = None  # what the peak memory covers, said where it is shown
    evaluation: EvaluationReport | None = None  # on the user's evaluation .npz, when one is given
    # J per sample over the timed windows and idle power apart, or why not measurable here
    energy: EnergyReport | None = None

    def __post_init__(self) -> None:
        self.status = ResultStatus(self.status)

    @property
    def ok(self) -> bool:
        return self.status == ResultStatus.OK

    @property
    def notes_text(self) -> str:
        """The notes as one text, each a sentence: joined with "; " they read "care.; While"."""
        return " ".join(n if n.rstrip()[-1:] in ".!?)" else f"{n}." for n in self.notes if n)

    @property
    def measured(self) -> bool:
        """It ran to the end and was timed: ok, or wrong outputs (whose figures say how wrong,
        so a mixed-precision search may start from them; nothing ranks them)."""
        return self.status in (ResultStatus.OK, ResultStatus.WRONG_OUTPUTS)

    def to_dict(
        self, with_samples: bool = False, with_configuration: bool = True
    ) -> dict[str, Any]:
        """JSON; a result without an energy record writes none (results stored before energy
        was measured write back exactly as they were read). Without the configuration: what a
        child or a node sends back to the parent that sent it the configuration (the parent
        holds it typed, so it does not cross twice)."""
        drop = () if with_samples else ("samples_ms",)
        drop += () if with_configuration else ("configuration",)
        return to_json(self, drop=drop + (("energy",) if self.energy is None else ()))

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], configuration: Configuration | None = None
    ) -> ConfigurationResult:
        """The one serializer (backend.knobs.serialize); names a newer writer added are dropped.
        `configuration`: the one the reader sent, for a result written without it."""
        if configuration is not None:
            data = {**data, "configuration": configuration}  # kept as it is, not re-read
        return from_json(cls, data, strict=False)


@dataclass(frozen=True)
class StoredResult:
    """A stored result read as types: its payload parsed once, configuration included.

    Readers (reporting frames, the worker's FP32 baseline lookup, CLI, pages) use this rather
    than payload dict keys, so no reader repeats the defaults of backend.specs. It lives in
    backend rather than storage because storage must not import the domain types.
    """

    id: int
    job_id: int
    created_at: datetime
    configuration: Configuration
    result: ConfigurationResult

    @classmethod
    def from_row(cls, row: ResultRow) -> StoredResult:
        """The row's payload parsed once, configuration included (the payload is its one copy:
        migration 0011 dropped the column that repeated it)."""
        return cls.of(row, ConfigurationResult.from_dict(row.payload))

    @classmethod
    def of(cls, row: ResultRow, result: ConfigurationResult) -> StoredResult:
        """The row just written for `result`, which the writer holds typed already."""
        return cls(row.id, row.job_id, row.created_at, result.configuration, result)

    @property
    def config_key(self) -> str:
        return self.result.config_key

    @property
    def status(self) -> ResultStatus:
        return self.result.status

    @property
    def ok(self) -> bool:
        return self.result.ok

    @property
    def measured(self) -> bool:
        return self.result.measured

    @property
    def latency(self) -> LatencyStats | None:
        return self.result.latency

    @property
    def error(self) -> str | None:
        return self.result.error


def fp32_baseline(stored: list[StoredResult], config: Configuration) -> StoredResult | None:
    """The measured FP32 result this configuration is compared with: same runtime, provider
    and batch."""
    return next(
        (
            r
            for r in stored
            if r.ok
            and r.latency is not None
            and r.configuration.precision == Precision.FP32
            and r.configuration.backend == config.backend
            and r.configuration.provider == config.provider
            and r.configuration.batch_size == config.batch_size
            and r.configuration.target == config.target
            and r.configuration.replicas == config.replicas
        ),
        None,
    )


ONE_WAY = 0.1  # a speed ratio more than this from 1 says a way: faster, or slower, than FP32
GAP = 1.25  # median-call and throughput speedups further apart than this are not one speed


def speeds_disagree(speedup: Any, throughput_ratio: Any) -> Any:
    """True where the median call's speed against FP32 and the throughput's tell different
    speeds: opposite ways, or more than GAP apart (stalls in either run do it). Such a speedup
    is explained by no rule (jobs/annotate) and is no firm figure (reporting/frames); floats or
    numpy arrays alike, NaN never disagrees."""
    faster, slower = 1 + ONE_WAY, 1 - ONE_WAY
    opposite = (speedup > faster) & (throughput_ratio < slower)
    opposite = opposite | (speedup < slower) & (throughput_ratio > faster)
    return opposite | (speedup > GAP * throughput_ratio) | (throughput_ratio > GAP * speedup)
