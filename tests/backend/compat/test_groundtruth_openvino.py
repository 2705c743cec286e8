"""Ground truth for the OpenVINO column on a sample of ONNX's node tests, really run by OpenVINO.

Every 40th case keeps this short; bench/openvino_groundtruth.py runs all of them.
"""

from __future__ import annotations

import pytest

from backend.compat.groundtruth import collect_cases

pytest.importorskip("openvino")

STRIDE = 40


def test_openvino_column_agrees_with_openvino_really_running_node_tests(data_dir):
    from backend.compat.groundtruth_openvino import run_cases_openvino

    sample = collect_cases()[::STRIDE]
    confusion = run_cases_openvino(sample, jobs=2, batch=25)
    counts = confusion.counts
    print("confusion:", counts, f"agreement {confusion.agreement:.2%}")
    for op, outcomes in confusion.disagreements_by_op().items():
        print(f"  {op}: {[(o.name, o.error or o.reason) for o in outcomes]}")
    assert sum(counts.values()) == len(sample)
    assert not [o.name for o in confusion.outcomes if o.error == "not run"]
    assert counts["TP"] > 20  # OpenVINO really runs many of them
    assert counts["TN"] >= 2  # and the column does say "fails" where OpenVINO fails
    assert all(o.reason for o in confusion.outcomes if not o.predicted)
    assert confusion.agreement >= 0.95
