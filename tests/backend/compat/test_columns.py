"""Each registered column on small real models: the cell it gives, and why it does not apply."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from backend.compat import build_matrix
from backend.compat import export as compat_export
from backend.compat.build import model_context
from backend.compat.cells import CellStatus, CompatCell
from backend.compat.columns import COLUMNS, CompatColumn, ModelContext
from backend.compat.facts import NodeFacts
from tests import models as model_factory


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


def test_openvino_knows_ops_without_a_translator(data_dir, tmp_path):
    softmax = _cell("openvino", _one_node(tmp_path / "softmax.onnx", "Softmax"))
    assert softmax.status == CellStatus.SUPPORTED
    assert softmax.reason == "OpenVINO translator for Softmax (version 13)"
    bernoulli = _cell("openvino", _one_node(tmp_path / "bernoulli.onnx", "Bernoulli", opset=15))
    assert bernoulli.status == CellStatus.UNSUPPORTED
    assert "no translator for Bernoulli" in bernoulli.reason


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
