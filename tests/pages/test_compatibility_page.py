"""The Compatibility page rendered by Streamlit's AppTest over a real SQLite library."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from backend.models.ingest import ingest_file
from backend.models.nodenames import body_nodes
from tests import models
from tests.pages.seed import metric_rows, open_page, texts


def _store(path: Path, name: str) -> int:
    return ingest_file(path, path.name, name=name).id


def _bf16_model(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Identity", ["h"], ["y"])],
        "bf16",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_empty_library_says_to_upload_a_model_first(data_dir):
    app = open_page("compatibility", role="viewer")  # through app.py: the page's own gate
    assert not app.exception
    assert any("No models yet" in info.value for info in app.info)


def test_page_shows_per_backend_summary_heat_map_and_nodes_behind_a_problem_op(data_dir, tmp_path):
    model_id = _store(_bf16_model(tmp_path / "bf16.onnx"), "bf16-relu")
    app = open_page("compatibility", role="viewer", model=model_id, op="Relu", backend="ort-cpu")
    assert not app.exception
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["ONNX Runtime CPU"] == "50%"  # Identity runs, Relu has no bfloat16 kernel
    # three to a row: six in one cut their names ("ONNX Runtime Tens...")
    assert len(metrics) > 3 and max(map(len, metric_rows(app.main))) == 3
    assert metrics["ONNX Runtime CUDA"] == "100%"
    assert metrics["TF-TRT"] == "n/a"
    assert any("Real session failed" in c.value for c in app.caption)
    chart = app.get("plotly_chart")
    assert len(chart) == 1
    table = app.dataframe[0].value
    assert list(table["node"]) == ["Relu_0"]
    assert table["reason"].iloc[0].startswith("no bfloat16 kernel for Relu on CPU")
    # each backend's column opens the Graph page coloured by its statuses
    links = [e.proto for e in app.get("page_link") if e.proto.label.endswith(": graph")]
    # each label leads with its backend, so a cut-off end still tells CPU from CUDA
    labels = {link.label for link in links}
    assert {"ONNX Runtime CPU: graph", "ONNX Runtime CUDA: graph"} <= labels, labels
    assert any(
        link.page == "graph"
        and "overlay=compat" in link.query_string
        and "backend=ort-cpu" in link.query_string
        for link in links
    ), links
    graph = open_page("graph", role="viewer", model=model_id, overlay="compat", backend="ort-cpu")
    assert not graph.exception and not graph.error
    src = graph.get("iframe")[0].proto.src
    captions = " ".join(c.value for c in graph.caption).replace("\\", "")
    assert "overlay=" in src and "unsupported (1 node)" in captions

    app.toggle(key="problems_toggle").set_value(True).run()
    assert not app.exception
    assert app.query_params["problems"] == "1"


def test_the_node_table_names_the_graph_each_node_sits_in_as_the_graph_page_does(
    data_dir, tmp_path
):
    """MatMul_4 sits in the main graph, MatMul_0 in If_2's then_branch (make_unnamed_if); the
    column spells a body as the Graph page's caption does (nodenames.body_nodes)."""
    model = models.make_unnamed_if()
    model_id = _store(models.save(model, tmp_path / "unnamed_if.onnx"), "unnamed_if")
    where = {b.name: b.where for b in body_nodes(model.graph)}
    assert where == {
        "MatMul_0": "If_2's then_branch",
        "Neg_0": "If_2's else_branch",
        "Sigmoid_1": "If_2's else_branch",
    }
    for op, expected in (
        ("MatMul", {"MatMul_4": "main", "MatMul_0": where["MatMul_0"]}),
        ("Neg", {"Neg_0": where["Neg_0"]}),
        ("Relu", {"Relu_3": "main"}),
    ):
        app = open_page("compatibility", role="viewer", model=model_id, op=op, backend="ort-cpu")
        assert not app.exception
        table = app.dataframe[0].value
        assert dict(zip(table["node"], table["graph"], strict=True)) == expected, op
    graph = open_page("graph", role="viewer", model=model_id, node="MatMul_0")
    assert "Node MatMul_0 is inside If_2's then_branch" in texts(graph).replace("\\", "")
