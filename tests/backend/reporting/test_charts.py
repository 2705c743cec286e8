"""Chart axes and titles read as what was measured, and fit the columns the pages draw them in."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import pytest

from backend.reporting import charts, style


def _measured(batches: list[int]) -> pd.DataFrame:
    """Rows as the results frame holds them, the columns these charts read."""
    return pd.DataFrame(
        {
            "status": "ok",
            "series": "#1 mlp CPU FP32",
            "label": [f"#1 mlp CPU FP32 b{b}" for b in batches],
            "batch_size": batches,
            "p50_ms": 1.0,
            "p90_ms": 1.5,
            "p99_ms": 2.0,
            "throughput": [1000.0 * b for b in batches],
        }
    )


@pytest.mark.parametrize("draw", [charts.latency_vs_batch, charts.throughput_vs_batch])
@pytest.mark.parametrize("batches", [[1], [1, 8, 32]])
def test_the_batch_axis_ticks_at_the_measured_sizes_only(
    draw: Callable[[pd.DataFrame], go.Figure], batches: list[int]
) -> None:
    """One size measured: a log axis left to itself ticks 0.125, 0.25, 0.5, 1, 2, 4, 8."""
    axis = draw(_measured(batches)).layout.xaxis
    assert axis.type == "log" and axis.tickmode == "array"
    assert list(axis.tickvals) == batches
    assert list(axis.ticktext) == [str(b) for b in batches]


def test_few_operators_are_counted_in_whole_steps() -> None:
    assert charts.op_histogram({"Gemm": 2, "Relu": 1}).layout.xaxis.dtick == 1
    # many: Plotly's own steps (2, 5, 10...) are whole, and a step of 1 would crowd the axis
    assert charts.op_histogram({"Conv": 300, "Relu": 12}).layout.xaxis.dtick is None


def test_a_latency_violin_spans_the_calls_measured_not_below_zero() -> None:
    """A walkthrough's violin of a CNN at batch 8 reached -3 ms: the density's tails ran past
    the samples. It stops at the fastest and slowest call."""
    frame = _measured([8]).assign(result_id=[1], stable=True)
    samples = {1: pd.Series([0.4, 0.5, 0.5, 0.6, 9.0, 12.0]).to_numpy()}
    [violin] = charts.latency_distribution(frame, samples).data
    assert violin.type == "violin" and violin.spanmode == "hard"


def test_a_long_title_is_wrapped_to_fit_a_half_width_chart_and_keeps_every_word() -> None:
    frame = pd.DataFrame(
        {
            "series": ["fp32", "fp32"],
            "label": ["fp32 b1", "fp32 b8"],
            "status": ["ok", "ok"],
            "batch_size": [1, 8],
            "p50_ms": [0.9, 1.0],
            "p90_ms": [1.0, 1.2],
            "p99_ms": [1.2, 40.0],
            "throughput": [1100.0, 8000.0],
        }
    )
    fig = charts.latency_vs_batch(frame)  # a p99 past 10x the largest p50 lengthens the title
    lines = fig.layout.title.text.split("<br>")
    assert len(lines) >= 2 and all(len(line) <= style.TITLE_WIDTH for line in lines)
    assert " ".join(lines).endswith("log scale: a p99 is over 10x the largest p50")
    assert fig.layout.margin.t >= 28 + 22 * len(lines)  # room above the plot for every line
    short = charts.throughput_vs_batch(frame)
    assert short.layout.title.text == "Throughput" and short.layout.margin.t == 50


def test_titles_legends_and_labels_fit_a_half_width_column_at_1100_px() -> None:
    """The walkthrough at 1100 px: titles cut after 44 characters, a legend of 8 series on the
    x-axis title, and 16 configuration names at -30 degrees overlapping each other."""
    series = [f"#{j} {m} CPU {p}" for j, m in ((1, "mlp"), (2, "cnn")) for p in ("FP16", "FP32")]
    series += [f"#{j} {m} CPU INT8 {q}" for j, m in ((1, "mlp"), (2, "cnn")) for q in ("a", "b")]
    rows = [(s, b) for s in series for b in (1, 8)]
    frame = pd.DataFrame(
        {
            "series": [s for s, _ in rows],
            "label": [f"{s} b{b}" for s, b in rows],
            "status": "ok",
            "batch_size": [b for _, b in rows],
            "p50_ms": 1.0,
            "p90_ms": 1.5,
            "p99_ms": 2.0,
            "throughput": 1000.0,
            "peak_rss_mb": 100.0,
            "gpu_memory_mb": float("nan"),
        }
    )
    latency = charts.latency_vs_batch(frame)
    lines = latency.layout.title.text.split("<br>")
    assert all(len(line) < 44 for line in lines), lines  # 44 were shown, the rest cut off
    # 8 legend entries: the figure grows so that the plot keeps its height and the legend,
    # a share of that height below it, stays clear of the axis title
    assert latency.layout.legend.y <= -0.3
    top = latency.layout.margin.t
    assert latency.layout.height >= style.PLOT_HEIGHT + top + style.LEGEND_ROW * 8
    memory = charts.memory_chart(frame)
    assert memory.layout.xaxis.tickangle == -90 and memory.layout.xaxis.dtick == 1
    assert charts.memory_chart(frame.head(4)).layout.xaxis.tickangle == -30


def test_boxes_past_max_violins_take_each_series_colour() -> None:
    """The walkthrough's two-model distribution, drawn as boxes past MAX_VIOLINS, was all one
    colour (PALETTE[0]) while every other chart coloured by series."""
    batches = list(range(1, charts.MAX_VIOLINS + 1))
    mlp, cnn = _measured(batches), _measured(batches)
    cnn["series"], cnn["label"] = "#2 cnn CPU FP32", [f"#2 cnn CPU FP32 b{b}" for b in batches]
    frame = pd.concat([mlp, cnn], ignore_index=True)
    frame["result_id"] = range(len(frame))
    samples = {i: pd.Series([0.5, 0.6, 0.7, 0.9]).to_numpy() for i in frame["result_id"]}
    boxes = charts.latency_distribution(frame, samples).data
    colors = style.series_colors(["#1 mlp CPU FP32", "#2 cnn CPU FP32"])
    assert [b.type for b in boxes] == ["box", "box"] and len(set(colors.values())) == 2
    assert [b.marker.color for b in boxes] == list(colors.values())
    assert [len(b.x) for b in boxes] == [len(batches)] * 2


def test_a_series_legend_key_is_a_filled_marker_whatever_its_first_point() -> None:
    """A mostly stable series whose first point was unstable showed a hollow circle in the
    legend, the very mark keyed 'hollow circle: measurement unstable'."""
    frame = _measured([1, 8, 32]).assign(
        speedup=[1.0, 2.0, 3.0],
        accuracy_loss=0.0,
        speedup_firm=True,
        stable=[False, True, True],
        pareto=False,
    )
    figure = charts.accuracy_vs_speedup(frame, "loss")
    shown = [t for t in figure.data if t.showlegend is not False]
    [key] = [t for t in shown if t.name == "#1 mlp CPU FP32"]
    assert key.marker.symbol == "circle", key.marker.symbol
    points = next(t for t in figure.data if t.name == key.name and t.showlegend is False)
    assert points.marker.symbol[0] == "circle-open" and points.legendgroup == key.legendgroup
