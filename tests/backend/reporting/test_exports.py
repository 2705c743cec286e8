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
            "j_per_sample": [None, float("nan")],
        }
    )
    table = exports.html_report("t", frame, [], None).split("<h2>All configurations</h2>")[1]
    assert "e+0" not in table and "e-0" not in table  # .4g wrote 1.488e+05
    for cell in ("148807.0", "84679.1", "0.006", "0.0236", ">0<"):
        assert cell in table, cell
    assert table.count(">–<") == 2  # no figure: a dash, not "nan"
    assert REGISTRY["accuracy_loss"].printf() == "%.3g"  # the Compare page's column, 2.36e-2 once
