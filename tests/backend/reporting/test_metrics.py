"""The metric registry: one declaration per figure, read the same way by every consumer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backend.reporting import charts, frames, metrics
from backend.reporting.metrics import REGISTRY, Aggregation, Better, Metric


def test_every_declared_figure_is_a_frame_column_or_one_the_compare_view_adds() -> None:
    added = {"speedup", "throughput_ratio", "accuracy_loss"}  # add_speedups, add_accuracy_loss
    generation = {m.key for m in metrics.GENERATION}  # backend/generate/points.py's frame
    generation.add("cost_per_million_tokens")  # priced there too, per output token
    assert set(REGISTRY) - added - generation <= set(frames.COLUMNS)
    from backend.generate import points

    assert "cost_per_million_tokens" in points.COLUMNS
    assert {"p50_ms", "p99_ms", "throughput", "peak_rss_mb", "cosine_similarity"} <= set(REGISTRY)


def test_every_generation_figure_is_a_column_of_the_generation_frame() -> None:
    from backend.generate import points

    assert {m.key for m in metrics.GENERATION} == set(points.FIGURES) <= set(points.COLUMNS)


def test_a_figure_is_declared_once() -> None:
    again = Metric("p50_ms", "p50", "ms", Better.LOWER, Aggregation.PERCENTILE, ".3f", "p50 ms")
    with pytest.raises(ValueError, match="'p50_ms' is declared twice"):
        metrics.register(again)
    assert REGISTRY["p50_ms"].label == "p50 latency"


def test_formats_for_tables_hover_and_streamlit_come_from_one_spec() -> None:
    p50, speedup, top1 = metrics.pick("p50_ms", "speedup", "top1_agreement")
    assert p50.text(1.23456) == "1.235" and p50.text(None) == "-" and p50.text(float("nan")) == "-"
    assert p50.hover("y") == "%{y:.3f} ms" and speedup.hover("x") == "%{x:.2f}x"
    assert speedup.printf() == "%.2fx" and p50.printf(".1f") == "%.1f"
    assert top1.text(0.987) == "98.7%" and top1.printf() == "percent"
    assert speedup.axis_title == "speedup vs baseline (x)" and top1.axis_title == "top-1 agreement"
    assert REGISTRY["peak_rss_mb"].cli_header == "RSS MB"
    assert REGISTRY["peak_rss_mb"].header == "peak RSS MB"


def test_accuracy_loss_complements_the_figures_that_are_better_higher() -> None:
    frame = pd.DataFrame(
        {
            "cosine_similarity": [0.99, 1.0],
            "top1_agreement": [0.5, 1.0],
            "eval_top1_accuracy": [0.9, None],
            "mean_rel_error": [0.01, 0.0],
            "max_abs_error": [0.2, 0.0],
        }
    )
    loss = {m: frames.add_accuracy_loss(frame, m)["accuracy_loss"].tolist() for m in metrics.LOSSES}
    assert loss["cosine_distance"] == pytest.approx([0.01, 0.0])
    assert loss["top1_disagreement"] == pytest.approx([0.5, 0.0])
    assert loss["eval_top1_error"][0] == pytest.approx(0.1) and np.isnan(loss["eval_top1_error"][1])
    assert loss["mean_rel_error"] == [0.01, 0.0] and loss["max_abs_error"] == [0.2, 0.0]
    assert frames.LOSS_METRICS["cosine_distance"] == "1 - cosine similarity"
    assert frames.LOSS_METRICS["mean_rel_error"] == "mean relative error"


def test_pareto_front_reads_each_metric_in_its_better_direction() -> None:
    p50, loss = REGISTRY["p50_ms"], REGISTRY["accuracy_loss"]
    latency = np.array([1.0, 0.5, 0.5, 2.0])  # lower is better here, unlike speedup
    losses = np.array([0.0, 0.01, 0.02, 0.0])
    assert metrics.pareto_front(p50, latency, loss, losses).tolist() == [True, True, False, False]
    speedup = 1.0 / latency  # the same points read as speedups give the same front
    front = metrics.pareto_front(REGISTRY["speedup"], speedup, loss, losses)
    assert front.tolist() == [True, True, False, False]


def test_chart_axes_are_the_registry_units() -> None:
    frame = pd.DataFrame(
        {
            "result_id": [1],
            "series": ["s"],
            "label": ["s b1"],
            "status": ["ok"],
            "batch_size": [1],
            "p50_ms": [1.0],
            "p90_ms": [1.1],
            "p99_ms": [1.2],
            "throughput": [1000.0],
            "speedup": [1.0],
            "accuracy_loss": [0.0],
            "pareto": [True],
        }
    )
    assert charts.latency_vs_batch(frame).layout.yaxis.title.text == "ms"
    assert charts.throughput_vs_batch(frame).layout.yaxis.title.text == "samples/s"
    pareto = charts.accuracy_vs_speedup(frame, frames.LOSS_METRICS["cosine_distance"])
    assert pareto.layout.xaxis.title.text == "speedup vs baseline (x)"
    assert pareto.layout.yaxis.title.text == "1 - cosine similarity"
    assert "speedup %{x:.2f}x" in pareto.data[0].hovertemplate


def test_cost_axes_are_the_registered_money_and_energy_figures_present() -> None:
    axes = [m.key for m in metrics.cost_axes(frames.COLUMNS)]
    assert axes == ["cost_per_million", "j_per_sample", "j_per_sample_above_idle"]  # not W
    energy = Metric("j_test_only", "energy", "J", Better.LOWER, Aggregation.ENERGY, ".3g", "J")
    metrics.register(energy)  # what the energy metrics will do: the axis appears by itself
    try:
        keys = [m.key for m in metrics.cost_axes([*frames.COLUMNS, "j_test_only"])]
        assert keys == [*axes, "j_test_only"]
    finally:
        del REGISTRY["j_test_only"]


def test_the_cost_speed_accuracy_front_reads_each_figure_its_way() -> None:
    cost, speed, loss = metrics.pick("cost_per_million", "throughput", "accuracy_loss")
    costs = np.array([1.0, 2.0, 1.0, 3.0, np.nan, 1.0])
    speeds = np.array([100.0, 300.0, 90.0, 200.0, 999.0, 100.0])
    losses = np.array([0.1, 0.1, 0.0, 0.2, 0.0, 0.1])
    front = metrics.pareto_many([(cost, costs), (speed, speeds), (loss, losses)])
    # 0: cheapest at its loss; 1: fastest; 2: most accurate; 3: beaten by 1 in all three;
    # 4: no cost (wrong outputs, unpriced) is never on it; 5: the same as 0, only the first
    assert front.tolist() == [True, True, True, False, False, False]


def test_a_stalled_p99_puts_latency_on_a_log_axis_and_the_title_says_why() -> None:
    """The walkthrough's chart: one p99 of 156 ms beside p50s near 1 ms flattened every line."""
    frame = pd.DataFrame(
        {
            "series": ["fp32", "fp32", "int8", "int8"],
            "label": ["fp32 b1", "fp32 b8", "int8 b1", "int8 b8"],
            "status": ["ok"] * 4,
            "batch_size": [1, 8, 1, 8],
            "p50_ms": [0.9, 3.5, 0.4, 1.2],
            "p90_ms": [1.0, 3.8, 0.5, 2.0],
            "p99_ms": [1.2, 4.1, 0.6, 156.0],
        }
    )
    stalled = charts.latency_vs_batch(frame)
    assert stalled.layout.yaxis.type == "log"
    assert "log scale: a p99 is over 10x the largest p50" in stalled.layout.title.text.replace(
        "<br>", " "
    )
    calm = charts.latency_vs_batch(frame.assign(p99_ms=[1.2, 4.1, 0.6, 2.5]))
    assert calm.layout.yaxis.type != "log" and "log scale" not in calm.layout.title.text


def test_an_unstable_point_is_drawn_hollow_and_says_so() -> None:
    frame = pd.DataFrame(
        {
            "series": ["int8", "int8"],
            "label": ["int8 b1", "int8 b8"],
            "speedup": [2.1, 2.9],
            "accuracy_loss": [0.01, 0.01],
            "pareto": [True, False],
            "stable": [True, False],
        }
    )
    points = charts.accuracy_vs_speedup(frame, "loss").data[0]  # then the front and the key
    assert list(points.marker.symbol) == ["circle", "circle-open"]
    assert points.text[0] == "int8 b1" and points.text[1].startswith("int8 b8 (unstable")


def test_significant_digit_figures_print_in_plain_decimals_never_in_exponents() -> None:
    """$/M printed 0.0008441 beside 1.296e-05 in one column (.4g switches notation)."""
    cost = REGISTRY["cost_per_million"]
    assert cost.spec == ".4g"  # the pages' and charts' format is unchanged
    assert [cost.text(v) for v in (0.0008441, 1.296e-05, 9.99996e-05, 148807.3, 12.5, 0.0)] == [
        "0.0008441",
        "0.00001296",
        "0.0001",
        "148807",
        "12.5",
        "0",
    ]
    assert REGISTRY["accuracy_loss"].text(1.2e-07) == "0.00000012"
    assert cost.text(None) == "-" and cost.text(float("nan")) == "-"
