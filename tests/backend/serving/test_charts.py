"""Serving charts laid out for a half-width column: long configuration names stay readable."""

from __future__ import annotations

from backend.results import LatencyStats
from backend.serving import charts
from backend.serving.types import BatchingPolicy, LoadPoint, LoadSpec, Scenario

LONG = "INT8 static (QDQ) on CPU, no batching"


def _point(queue_ms: float) -> LoadPoint:
    """A predicted point, as a sweep's costs predict one (no server ran)."""
    latency = LatencyStats(count=1, mean=1, std=0, min=1, p50=1, p90=1, p95=1, p99=1, max=1)
    load = LoadSpec(Scenario.CONCURRENCY, duration_s=1, concurrency=1)
    policy = BatchingPolicy(max_batch_size=1, max_queue_delay_us=0)
    return LoadPoint(
        Scenario.CONCURRENCY, policy, load, 100.0, latency, queue_ms, 0.1, {1: 500}, True, "",
        predicted=True,
    )  # fmt: skip


def test_the_queue_legend_sits_above_the_bars_clear_of_their_slanted_names() -> None:
    fig = charts.queue_compute_split({f"{LONG} x1": _point(1.8), "FP32 on CPU x1": _point(0.5)})
    legend = fig.layout.legend
    assert legend.yanchor == "bottom" and legend.y >= 1.0  # not under the plot, where names are
    assert fig.layout.xaxis.automargin


def test_the_batch_histogram_title_puts_the_configuration_on_its_own_line() -> None:
    fig = charts.batch_histogram(_point(1.0), LONG)
    assert fig.layout.title.text == f"Batch sizes formed (predicted):<br>{LONG}"
    assert fig.layout.margin.t >= 80  # room for the second line
