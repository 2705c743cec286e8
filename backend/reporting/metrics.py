"""The metric registry: every measured figure's name, unit, better direction, aggregation, format
and labels, declared once and read by frames, charts, the CLI tables, the Compare page and exports.

A metric's key is its column in reporting.frames' results frame. `spec` is one format for a value
in both Python (f"{v:{spec}}") and Plotly/d3 hover templates (%{y:<spec>}); Streamlit's column
format is derived from it (`printf`). Adding a figure (energy per sample, cost per million samples,
time to first token...) is one `Metric(...)` in REGISTRY plus the frame column that holds it.

Not to be confused with backend/jobs/prometheus.py: the worker's Prometheus counters about jobs.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from backend.measure_settings import PEAK_SCOPE

if TYPE_CHECKING:  # numpy is imported by the Pareto functions: the CLI's tables read this registry
    import numpy as np


class Better(StrEnum):
    """Which way a figure improves: what Pareto fronts and "best" pick by."""

    LOWER = "lower"
    HIGHER = "higher"


class Aggregation(StrEnum):
    """How one result's figure is made from what its run measured."""

    PERCENTILE = "percentile of the timed calls"
    MEAN = "mean of the timed calls"
    SPREAD = "standard deviation of the timed calls"
    EXTREME = "least or most of the timed calls"
    RATE = "items (samples, tokens) over the timed window"
    PEAK = "peak over the measured scope"
    ONCE = "measured once per configuration"
    WORST = "worst element against FP32"
    OVER_OUTPUTS = "mean over the compared outputs"
    SHARE = "share of the compared rows"
    RATIO = "ratio to a reference result"
    FRACTION = "fraction of a reference figure"
    ENERGY = "energy over the timed window"  # per sample (J/sample) or per second (W)
    PRICE = "price per hour over items per hour (a measured rate)"  # $ per million items
    GIVEN = "given by the user, not measured"  # a price per hour


SIGNIFICANT = re.compile(r"^\.(\d+)g$")  # ".4g": that many significant digits


def positional(value: float, digits: int) -> str:
    """`value` to `digits` significant digits in plain decimals, never in exponent notation
    (0.00001296, not 1.296e-05; 148807, not 1.488e+05), trailing zeros dropped as g does."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude >= digits - 1:  # whole units already carry the digits asked for
        return f"{value:.0f}"
    text = f"{value:.{digits - 1 - magnitude}f}"
    return text.rstrip("0").rstrip(".")


def cell(value: float | None, spec: str) -> str:
    """A number as tables print it: formatted by `spec`, '-' when absent (None or NaN). A
    significant-digits spec (".4g") is printed in plain decimals, so one column never mixes
    0.0008441 with 1.296e-05; charts' hover templates (d3) keep the spec as it is."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    digits = SIGNIFICANT.match(spec)
    if digits and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return positional(float(value), int(digits.group(1)))
    return f"{value:{spec}}"


@dataclass(frozen=True)
class Metric:
    """One measured figure people compare.

    label: what it is, in words (axis titles, help); header: its table column on pages and in
    reports ("p50 ms"); cli: its narrower terminal column, when that differs.
    """

    key: str
    label: str
    unit: str
    better: Better
    aggregation: Aggregation
    spec: str
    header: str
    cli: str = ""

    @property
    def higher_is_better(self) -> bool:
        return self.better is Better.HIGHER

    @property
    def cli_header(self) -> str:
        return self.cli or self.header

    @property
    def axis_title(self) -> str:
        """'speedup vs baseline (x)': the label with its unit."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    @property
    def suffix(self) -> str:
        """The unit after a number: '3.1 ms', '1.20x', '0.98' (no unit)."""
        if not self.unit:
            return ""
        return self.unit if self.unit == "x" else f" {self.unit}"

    def text(self, value: float | None, spec: str | None = None) -> str:
        """The value as tables print it, without its unit (the header says it); '-' when absent."""
        return cell(value, spec or self.spec)

    def hover(self, ref: str, spec: str | None = None) -> str:
        """A Plotly hover-template value with its unit: hover('y') -> '%{y:.3f} ms'."""
        return "%{" + f"{ref}:{spec or self.spec}" + "}" + self.suffix

    def printf(self, spec: str | None = None) -> str:
        """Streamlit NumberColumn's format: 'percent' for shares, printf otherwise ('%.2fx')."""
        spec = spec or self.spec
        if spec.endswith("%"):
            return "percent"
        return f"%{spec}" + ("x" if self.unit == "x" else "")


# Short names for the table below, which reads one figure per line.
L, H, A, MS = Better.LOWER, Better.HIGHER, Aggregation, "ms"
# fmt: off
LATENCY = (  # key, label, unit, better, aggregation, spec, header
    Metric("p50_ms", "p50 latency", MS, L, A.PERCENTILE, ".3f", "p50 ms"),
    Metric("p90_ms", "p90 latency", MS, L, A.PERCENTILE, ".3f", "p90 ms"),
    Metric("p95_ms", "p95 latency", MS, L, A.PERCENTILE, ".3f", "p95 ms"),
    Metric("p99_ms", "p99 latency", MS, L, A.PERCENTILE, ".3f", "p99 ms"),
    Metric("mean_ms", "mean latency", MS, L, A.MEAN, ".3f", "mean ms"),
    Metric("std_ms", "latency spread", MS, L, A.SPREAD, ".3f", "std ms"),
    Metric("min_ms", "fastest call", MS, L, A.EXTREME, ".3f", "min ms"),
    Metric("max_ms", "slowest call", MS, L, A.EXTREME, ".3f", "max ms"),
)
SPEED = (
    Metric("throughput", "throughput", "samples/s", H, A.RATE, ".1f", "samples/s"),
    Metric("speedup", "speedup vs baseline", "x", H, A.RATIO, ".2f", "speedup (p50)"),
    Metric("throughput_ratio", "throughput vs baseline", "x", H, A.RATIO, ".2f",
           "throughput ratio"),
    Metric("session_create_ms", "session creation", MS, L, A.ONCE, ".1f", "session ms"),
    Metric("first_inference_ms", "first inference", MS, L, A.ONCE, ".1f", "first call ms"),
)
MEMORY = (
    Metric("peak_rss_mb", f"peak memory (RSS, {PEAK_SCOPE})", "MB", L, A.PEAK, ".0f",
           "peak RSS MB", cli="RSS MB"),
    Metric("gpu_memory_mb", "GPU memory", "MB", L, A.PEAK, ".0f", "GPU MB"),
    Metric("model_size_bytes", "model file size", "bytes", L, A.ONCE, ".0f", "model bytes"),
)
ACCURACY = (  # against FP32's outputs on the same inputs, unless the label says otherwise
    Metric("max_abs_error", "max absolute error", "", L, A.WORST, ".3g", "max abs error"),
    Metric("mean_rel_error", "mean relative error", "", L, A.OVER_OUTPUTS, ".3g",
           "mean rel. error"),
    Metric("cosine_similarity", "cosine similarity", "", H, A.OVER_OUTPUTS, ".5f", "cosine"),
    # "vs FP32" in its header: a share of rows whose argmax matches FP32's, not accuracy on data
    Metric("top1_agreement", "top-1 agreement", "", H, A.SHARE, ".1%", "top-1 vs FP32"),
    Metric("eval_top1_accuracy", "top-1 accuracy on the evaluation set", "", H, A.SHARE, ".1%",
           "top-1 on eval set"),
    Metric("eval_top1_agreement", "top-1 agreement with FP32 on the evaluation set", "", H,
           A.SHARE, ".1%", "top-1 agreement (eval set)"),
    # read from one of the above as the user chooses (LOSSES); 0 means FP32's outputs
    # .3g as its sources: 0.0236, not .2e's 2.36e-02 (tiny FP16 losses still read 1.2e-07)
    Metric("accuracy_loss", "accuracy loss", "", L, A.OVER_OUTPUTS, ".3g", "accuracy loss"),
)
HARDWARE = (  # GPU results: what the timing includes and the distance to the device's peak
    Metric("copy_share", "copy share of end-to-end p50", "", L, A.FRACTION, ".0%", "copy share"),
    Metric("tflops", "achieved FLOP/s", "TFLOP/s", H, A.RATE, ".2f", "TFLOP/s"),
    Metric("peak_fraction", "share of the device's peak FLOP/s", "", H, A.FRACTION, ".1%",
           "of peak"),
    Metric("mlperf_share", "share of MLPerf ResNet-50 per GPU", "", H, A.FRACTION, ".1%",
           "of MLPerf ResNet-50"),
)
GENERATION = (  # a generation job's points (backend/generate/points.py frame)
    Metric("ttft_p50_ms", "time to first token p50", MS, L, A.PERCENTILE, ".2f", "TTFT p50 ms"),
    Metric("ttft_p99_ms", "time to first token p99", MS, L, A.PERCENTILE, ".2f", "TTFT p99 ms"),
    Metric("itl_p50_ms", "inter-token latency p50", MS, L, A.PERCENTILE, ".3f", "ITL p50 ms"),
    Metric("itl_p99_ms", "inter-token latency p99", MS, L, A.PERCENTILE, ".3f", "ITL p99 ms"),
    Metric("e2e_p50_ms", "end-to-end generation p50", MS, L, A.PERCENTILE, ".1f", "e2e p50 ms"),
    Metric("output_tokens_per_s", "output tokens, all sequences", "tokens/s", H, A.RATE,
           ".1f", "tokens/s"),
    Metric("decode_tokens_per_s", "decode tokens, sequences / ITL p50", "tokens/s", H,
           A.RATE, ".1f", "decode tokens/s"),
    Metric("weights_mb", "weights", "MB", L, A.ONCE, ".1f", "weights MB"),
    Metric("kv_cache_mb", "KV cache at prompt + new tokens, every sequence", "MB", L, A.ONCE,
           ".2f", "KV cache MB"),
    Metric("memory_mb", "weights + KV cache", "MB", L, A.ONCE, ".1f", "weights + KV MB"),
    Metric("bandwidth_fraction", "share of the device's peak memory bandwidth per decode step",
           "", H, A.FRACTION, ".0%", "of peak bandwidth"),
    Metric("perplexity", "perplexity on the uploaded text", "", L, A.ONCE, ".3f", "perplexity"),
    Metric("greedy_agreement", "greedy tokens equal to FP32's before the first divergence "
           "(worst sequence, share of new tokens)", "", H, A.SHARE, ".0%", "greedy agreement"),
)
ENERGY = (  # counters read at the timed windows' edges (backend/energy): NVML on GPUs, RAPL on CPUs
    Metric("j_per_sample", "energy per sample (median of the timed windows)", "J", L, A.ENERGY,
           ".4g", "J/sample"),
    Metric("j_per_sample_above_idle", "energy per sample above idle power", "J", L, A.ENERGY,
           ".4g", "J/sample above idle", cli="J above idle"),
    Metric("active_w", "power while timed", "W", L, A.ENERGY, ".1f", "W timed"),
    Metric("idle_w", "idle power (measured apart, before the timed loop)", "W", L, A.ONCE, ".1f",
           "idle W"),
)
COST = (  # a price per hour (given) over a measured rate: backend/pricing.py
    Metric("price_per_hour", "price per hour of the hardware target", "$/h", L, A.GIVEN, ".2f",
           "$/h"),
    Metric("cost_per_million", "cost per million inferences", "$/M", L, A.PRICE, ".4g",
           "$ per M inferences", cli="$/M"),  # not "$/M inf": read as infinity
    Metric("cost_per_million_tokens", "cost per million output tokens", "$/M tokens", L,
           A.PRICE, ".4g", "$ per M tokens"),
)
# fmt: on

REGISTRY: dict[str, Metric] = {}


def register(*metrics: Metric) -> None:
    """Add figures to the registry; a key already declared is refused (one declaration each)."""
    for metric in metrics:
        if metric.key in REGISTRY:
            raise ValueError(f"metric {metric.key!r} is declared twice")
        REGISTRY[metric.key] = metric


register(*LATENCY, *SPEED, *MEMORY, *ACCURACY, *HARDWARE, *GENERATION, *ENERGY, *COST)


def metric(key: str) -> Metric:
    """The declared metric of a frame column; a KeyError names the undeclared key."""
    return REGISTRY[key]


def pick(*keys: str) -> list[Metric]:
    """Several declared metrics in the order given: a table's or chart's figures."""
    return [REGISTRY[key] for key in keys]


# Accuracy loss as the user chooses to read it: (source column, read as 1 - value). A source
# that is better higher (cosine, top-1) is complemented, so 0 always means "same as FP32".
LOSSES: dict[str, str] = {
    "mean_rel_error": "mean_rel_error",
    "max_abs_error": "max_abs_error",
    "cosine_distance": "cosine_similarity",
    "top1_disagreement": "top1_agreement",
    "eval_top1_error": "eval_top1_accuracy",
}


def loss_label(loss: str) -> str:
    """'1 - cosine similarity' for a complemented source, its own label otherwise."""
    source = REGISTRY[LOSSES[loss]]
    return f"1 - {source.label}" if source.higher_is_better else source.label


def cost_axes(columns: Iterable[str]) -> list[Metric]:
    """The figures a cost axis can show, among `columns`: money (PRICE) and energy (ENERGY in
    joules) per item, as registered; power (W) is a rate, not a cost per item."""
    present = set(columns)

    def per_item(m: Metric) -> bool:
        return m.aggregation is Aggregation.PRICE or (
            m.aggregation is Aggregation.ENERGY and m.unit == "J"
        )

    found = [m for m in REGISTRY.values() if per_item(m) and m.key in present]
    return sorted(found, key=lambda m: m.aggregation is not Aggregation.PRICE)  # money first


def pareto_many(figures: list[tuple[Metric, np.ndarray]]) -> np.ndarray:
    """True where no other point is at least as good in every figure and better in one (each
    read in its own better direction); a point with a non-finite value is never on it, and of
    identical points only the first is."""
    import numpy as np

    signs = [1.0 if m.higher_is_better else -1.0 for m, _ in figures]
    values = np.column_stack(
        [np.asarray(v, dtype=float) * s for (_, v), s in zip(figures, signs, strict=True)]
    )
    mask = np.zeros(len(values), dtype=bool)  # now every figure is better higher
    valid = np.flatnonzero(np.isfinite(values).all(axis=1))
    for i in valid:
        others = values[valid]
        dominated = (others >= values[i]).all(axis=1) & (others > values[i]).any(axis=1)
        same_before = (others == values[i]).all(axis=1) & (valid < i)
        mask[i] = not dominated.any() and not same_before.any()
    return mask


def pareto_front(x: Metric, x_values: np.ndarray, y: Metric, y_values: np.ndarray) -> np.ndarray:
    """True where no other point is at least as good in both metrics and better in one, each read
    in its own better direction (speedup higher, accuracy loss lower); of identical points only
    the first is marked, and a point with a non-finite value never is."""
    import numpy as np

    xs = np.asarray(x_values, dtype=float) * (1.0 if x.higher_is_better else -1.0)
    ys = np.asarray(y_values, dtype=float) * (-1.0 if y.higher_is_better else 1.0)
    mask = np.zeros(xs.shape, dtype=bool)  # now x is better higher and y better lower
    valid = np.flatnonzero(np.isfinite(xs) & np.isfinite(ys))
    order = valid[np.lexsort((ys[valid], -xs[valid]))]  # best x first, then best y
    best_y = np.inf
    for index in order:
        if ys[index] < best_y:
            mask[index] = True
            best_y = ys[index]
    return mask
