"""The HTML report's table prints each figure in the metric registry's format."""

from __future__ import annotations

import pandas as pd

from backend.reporting import exports
from backend.reporting.metrics import REGISTRY


def test_the_report_table_prints_figures_as_the_registry_formats_them() -> None:
    frame = pd.DataFrame(
        {
            "label": ["#1 mlp CPU FP32 b1", "#1 mlp CPU INT8 static (QDQ) b1"],
            "status": "ok",
            "p50_ms": [0.006099, 0.009184],
            "throughput": [148807.0, 84679.1],
            "accuracy_loss": [0.0, 0.02364],
            "p99_ms": [None, 0.0123],
            "j_per_sample": [None, float("nan")],
        }
    )
    table = exports.html_report("t", frame, [], None).split("<h2>All configurations</h2>")[1]
    assert "e+0" not in table and "e-0" not in table  # .4g wrote 1.488e+05
    for cell in ("148807.0", "84679.1", "0.006", "0.0236", ">0<"):
        assert cell in table, cell
    assert table.count(">–<") == 1  # no figure: a dash, not "nan"
    assert "Not shown, empty in every row: j_per_sample." in table  # not a column of dashes
    assert REGISTRY["accuracy_loss"].printf() == "%.3g"  # the Compare page's column, 2.36e-2 once


def test_the_report_leaves_out_empty_columns_and_says_a_repeated_sentence_once() -> None:
    """shots/f04: j_per_sample and idle_w empty in every row, the same long energy_source
    sentence in every row, and no Stable or Speedup firm column while its chart keyed the
    hollow diamond 'speedup not firm'."""
    source = "RAPL is not readable on this host (no /sys/class/powercap): energy is not measured"
    frame = pd.DataFrame(
        {
            "label": ["#1 mlp CPU FP32 b1", "#1 mlp CPU INT8 dynamic b1"],
            "status": "ok",
            "stable": [True, False],
            "speedup": [1.0, 2.5],
            "speedup_firm": [True, False],
            "j_per_sample": [None, float("nan")],
            "idle_w": [None, None],
            "energy_source": source,
        }
    )
    report = exports.html_report("t", frame, [], None, ["The cheapest configuration is X."])
    table = report.split("<h2>All configurations</h2>")[1]
    assert "<p>The cheapest configuration is X.</p>" in report
    assert "<th>Stable</th>" in table and "<th>Speedup firm</th>" in table
    assert "<td>yes</td>" in table and "<td>no</td>" in table
    assert "<th>j_per_sample</th>" not in table and "<th>idle_w</th>" not in table
    assert "Not shown, empty in every row: j_per_sample, idle_w." in table
    assert table.count(source) == 1 and f"energy_source (every row): {source}." in table
