"""Each registered column on small real models: the cell it gives, and why it does not apply."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from backend.compat import build_matrix, datafiles
from backend.compat import export as compat_export
from backend.compat.build import model_context
from backend.compat.cells import CellStatus, CompatCell
from backend.compat.columns import COLUMNS, CompatColumn, ModelContext
from backend.compat.columns.openvino import openvino_cell
from backend.compat.facts import NodeFacts
from tests import models as model_factory
from tests.backend.compat.test_facts import loop_holding_an_if


def _one_node(
    path: Path, op: str, dtype: int = TensorProto.FLOAT, opset: int = 17, **attrs: object
) -> Path:
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        op.lower(),
        [helper.make_tensor_value_info("x", dtype, [2, 3])],
        [helper.make_tensor_value_info("y", dtype, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _cell(column: str, path: Path, model_format: str = "onnx") -> CompatCell:
    nodes, context = model_context(path, model_format)
    return COLUMNS[column].cell(nodes[0], context)


def test_every_column_is_registered_under_its_own_name_with_a_label():
    assert list(COLUMNS) == [
        "ort-cpu",
        "ort-cuda",
        "ort-tensorrt",
        "tensorrt",
        "openvino",
        "tf-trt",
    ]
    for name, column in COLUMNS.items():
        assert column.name == name and column.label


def test_ort_cpu_matches_kernels_by_element_type(data_dir, tmp_path):
    relu = _cell("ort-cpu", _one_node(tmp_path / "relu.onnx", "Relu"))
    assert relu.status == CellStatus.SUPPORTED and relu.reason.startswith("CPU kernel Relu")
    assert relu.source.startswith("registry: onnxruntime")
    bf16 = _cell("ort-cpu", _one_node(tmp_path / "bf16.onnx", "Relu", TensorProto.BFLOAT16))
    assert bf16.status == CellStatus.UNSUPPORTED
    assert bf16.reason.startswith("no bfloat16 kernel for Relu on CPU")


def test_ort_cuda_says_when_a_node_falls_back_to_cpu(data_dir, tmp_path):
    path = tmp_path / "mean.onnx"
    graph = helper.make_graph(
        [helper.make_node("Mean", ["a", "b"], ["y"])],
        "mean",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    cell = _cell("ort-cuda", path)
    assert cell.status == CellStatus.UNSUPPORTED
    assert cell.reason.endswith("runs on CPU: falls back")
    bf16 = _cell("ort-cuda", _one_node(tmp_path / "bf16.onnx", "Relu", TensorProto.BFLOAT16))
    assert bf16.status == CellStatus.SUPPORTED  # CUDA has bfloat16 Relu kernels


def test_tensorrt_and_its_ort_provider_apply_the_parser_rules(data_dir, tmp_path):
    relu = _cell("tensorrt", _one_node(tmp_path / "relu.onnx", "Relu"))
    assert relu.status == CellStatus.SUPPORTED and relu.reason == "TensorRT importer for Relu"
    assert relu.source.startswith("list: ")
    old = _one_node(tmp_path / "relu8.onnx", "Relu", opset=8)
    native, ep = _cell("tensorrt", old), _cell("ort-tensorrt", old)
    assert native.status == ep.status == CellStatus.UNSUPPORTED
    assert "parses opset 9-24; this model is opset 8" in native.reason
    assert "hands it to CUDA/CPU" in ep.reason and "hands it" not in native.reason
    assert native.fix == ep.fix == "change opset: convert the model to opset 9"


def test_openvino_list_knows_ops_without_a_translator(data_dir, tmp_path):
    """The transcribed list: the fallback where OpenVINO is not installed."""
    support = datafiles.load("openvino")
    nodes, _ = model_context(_one_node(tmp_path / "softmax.onnx", "Softmax"))
    softmax = openvino_cell(nodes[0], support)
    assert softmax.status == CellStatus.SUPPORTED
    assert softmax.reason == "OpenVINO translator for Softmax (version 13)"
    nodes, _ = model_context(_one_node(tmp_path / "bernoulli.onnx", "Bernoulli", opset=15))
    bernoulli = openvino_cell(nodes[0], support)
    assert bernoulli.status == CellStatus.UNSUPPORTED
    assert "no translator for Bernoulli" in bernoulli.reason


def test_openvino_column_is_answered_by_openvino_itself(data_dir, tmp_path, cnn_path):
    pytest.importorskip("openvino")
    nodes, context = model_context(cnn_path)
    cells = [COLUMNS["openvino"].cell(node, context) for node in nodes]
    assert {c.status for c in cells} == {CellStatus.SUPPORTED}
    assert all(c.source.startswith("query_model: openvino ") for c in cells)
    assert any(c.reason == "OpenVINO CPU takes it (query_model)" for c in cells)
    assert COLUMNS["openvino"].source(context)["release"].startswith("openvino 20")


def test_openvino_column_names_the_op_openvino_lacks(data_dir, tmp_path):
    """Bernoulli is a standard ONNX op OpenVINO's frontend cannot convert: read_model fails and
    its report names the op, so only that node is unsupported; Relu keeps the list's answer."""
    pytest.importorskip("openvino")
    relu = helper.make_node("Relu", ["x"], ["r"])
    bernoulli = helper.make_node("Bernoulli", ["r"], ["y"])
    graph = helper.make_graph(
        [relu, bernoulli],
        "bernoulli",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "bernoulli.onnx"))
    nodes, context = model_context(tmp_path / "bernoulli.onnx")
    relu_cell, bernoulli_cell = (COLUMNS["openvino"].cell(node, context) for node in nodes)
    assert bernoulli_cell.status == CellStatus.UNSUPPORTED
    assert bernoulli_cell.reason.startswith("OpenVINO read_model (its ONNX frontend) fails on ")
    assert "Bernoulli-15" in bernoulli_cell.reason and bernoulli_cell.source.startswith("read: ")
    assert relu_cell.status == CellStatus.SUPPORTED
    assert relu_cell.reason.endswith("cannot read this model because of another op")


def test_tftrt_is_unavailable_for_onnx_uploads_and_says_why(data_dir, mlp_path):
    column = COLUMNS["tf-trt"]
    _, onnx_context = model_context(mlp_path, "onnx")
    availability = column.availability(onnx_context)
    assert not availability.available
    assert availability.reason == "not applicable: TF-TRT applies to SavedModel uploads only"
    nodes, saved_context = model_context(mlp_path, "savedmodel")
    assert column.availability(saved_context).available
    assert column.cell(nodes[0], saved_context).status == CellStatus.UNKNOWN


class _EverythingRuns(CompatColumn):
    name = "everything"
    label = "A column added in one file"

    def cell(self, node: NodeFacts, context: ModelContext) -> CompatCell:
        return CompatCell(CellStatus.SUPPORTED, f"runs {node.op_type}", "test column")


def test_a_newly_registered_column_appears_in_the_matrix_without_touching_build(
    data_dir, tmp_path, monkeypatch
):
    monkeypatch.setitem(COLUMNS, "everything", _EverythingRuns())
    path = model_factory.save(model_factory.make_mlp(), tmp_path / "mlp.onnx")
    matrix = build_matrix(path, with_placement=False)
    assert matrix.backends[-1] == "everything"
    assert [c.reason for c in matrix.cells["everything"]][:2] == ["runs MatMul", "runs Add"]
    summary = {s.backend: s for s in compat_export.summary(matrix)}
    assert summary["everything"].label == "A column added in one file"
    assert summary["everything"].share == 1.0


def _if_model(path: Path, then_out: str, else_out: str, else_shape: list[int]) -> Path:
    """x -> If(cond) with then: Identity(x) -> then_out [2, 3], else: Neg(x) -> else_out."""
    f = TensorProto.FLOAT
    then_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], [then_out])],
        "then_g",
        [],
        [helper.make_tensor_value_info(then_out, f, [2, 3])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], [else_out])],
        "else_g",
        [],
        [helper.make_tensor_value_info(else_out, f, else_shape)],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch)],
        "if_model",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", f, [2, 3]),
        ],
        [helper.make_tensor_value_info("y", f, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_tensorrt_checks_the_if_and_reduce_conditions_this_model_meets(data_dir, tmp_path):
    """The support matrix's conditions on If and ReduceSum, checked against the walkthrough's
    model: both hold there, so the cells say supported and which facts meet them."""
    path = model_factory.save(model_factory.make_unnamed_if(), tmp_path / "unnamed_if.onnx")
    nodes, context = model_context(path)
    by_name = {n.name: n for n in nodes}
    for column in ("tensorrt", "ort-tensorrt"):
        cell = COLUMNS[column].cell(by_name["If_2"], context)
        assert cell.status == CellStatus.SUPPORTED, cell
        assert cell.reason == (
            "TensorRT importer for If; met here: output tensors of the two conditional branches "
            "must have the same rank and must have different names (t_out / e_out: rank 2 each)"
        )
        reduce = COLUMNS[column].cell(by_name["ReduceSum_0"], context)
        assert reduce.status == CellStatus.SUPPORTED, reduce
        assert reduce.reason.endswith(
            "met here: `axes` must be an initializer (`axes` is not an input)"
        )


def test_tensorrt_says_which_condition_an_if_breaks_and_which_it_cannot_tell(data_dir, tmp_path):
    same = _if_model(tmp_path / "same.onnx", "o", "o", [2, 3])
    native, ep = _cell("tensorrt", same), _cell("ort-tensorrt", same)
    assert native.status == ep.status == CellStatus.UNSUPPORTED
    assert native.reason.startswith("TensorRT's If importer: not met here: output tensors")
    assert "(both branches name their output 'o')" in native.reason
    assert ep.reason.endswith("the TensorRT EP hands it to CUDA/CPU")
    ranks = _cell("tensorrt", _if_model(tmp_path / "ranks.onnx", "t", "e", [6]))
    assert ranks.status == CellStatus.UNSUPPORTED
    assert "(t has rank 2, e rank 1)" in ranks.reason
    ok = _cell("tensorrt", _if_model(tmp_path / "ok.onnx", "t", "e", [2, 3]))
    assert ok.status == CellStatus.SUPPORTED and "(t / e: rank 2 each)" in ok.reason


def test_tensorrt_reduce_with_axes_from_an_input_is_partial_saying_what_is_unknown(
    data_dir, tmp_path
):
    path = tmp_path / "reduce_axes.onnx"
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"])],
        "reduce_axes",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("axes", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    cell = _cell("tensorrt", path)
    assert cell.status == CellStatus.PARTIAL
    assert cell.reason == (
        "not known here: `axes` must be an initializer (`axes` is 'axes', not an initializer)"
    )
    # conditions no check covers keep the support matrix's own words, as before
    loop = model_factory.save(loop_holding_an_if(), tmp_path / "loop.onnx")
    nodes, context = model_context(loop)
    cell = COLUMNS["tensorrt"].cell(next(n for n in nodes if n.op_type == "Loop"), context)
    assert (cell.status, cell.reason) == (
        CellStatus.PARTIAL,
        "Scan output length cannot be dynamic",
    )
