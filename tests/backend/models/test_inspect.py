"""Model inspection on small real ONNX files: what the model library shows about an upload."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from backend.errors import UserError
from backend.models.inspect import external_data_files, inspect_model
from tests import models


def test_mlp_metadata_lists_opset_io_ops_and_parameters(mlp_path: Path) -> None:
    meta = inspect_model(mlp_path)

    assert meta.opset == 17
    assert meta.ir_version == 8
    assert meta.producer == "optiboard-tests"
    assert meta.inputs == [{"name": "x", "dtype": "float32", "shape": ["N", 16]}]
    assert meta.outputs == [{"name": "probs", "dtype": "float32", "shape": ["N", 10]}]
    assert meta.op_histogram == {"Add": 2, "MatMul": 2, "Relu": 1, "Softmax": 1}
    assert meta.parameter_count == 16 * 32 + 32 + 32 * 10 + 10
    assert meta.node_count == 6
    assert meta.warnings == []
    assert meta.custom_domains == []


def test_to_dict_carries_every_key_the_model_row_reads(mlp_path: Path) -> None:
    data = inspect_model(mlp_path).to_dict()

    for key in ("opset", "ir_version", "producer", "inputs", "outputs", "op_histogram"):
        assert key in data
    assert data["parameter_count"] == 874
    assert data["node_count"] == 6
    assert data["warnings"] == []


def test_integer_inputs_with_two_symbolic_dims_are_reported(transformer_path: Path) -> None:
    meta = inspect_model(transformer_path)

    assert meta.inputs == [{"name": "tokens", "dtype": "int64", "shape": ["batch", "seq"]}]
    assert meta.outputs[0]["shape"] == ["batch", "seq", 32]
    assert meta.op_histogram["LayerNormalization"] == 1


def test_unknown_dimension_is_shown_as_question_mark(tmp_path: Path) -> None:
    model = models.make_mlp()
    model.graph.input[0].type.tensor_type.shape.dim[0].Clear()
    path = models.save(model, tmp_path / "unknown_dim.onnx")

    assert inspect_model(path).inputs[0]["shape"] == ["?", 16]


def test_custom_domain_op_is_accepted_with_a_warning(tmp_path: Path) -> None:
    path = models.save(models.make_custom_op_model(), tmp_path / "custom.onnx")

    meta = inspect_model(path)

    assert meta.op_histogram == {"Relu": 1, "com.acme::MyOp": 1}
    assert meta.custom_domains == ["com.acme"]
    assert meta.warnings == [
        "Node 'custom' uses op 'MyOp' from custom domain 'com.acme' that no runtime can run; "
        "the benchmark will fail unless a custom-op library is registered."
    ]


def test_microsoft_contrib_ops_are_not_flagged_as_custom(tmp_path: Path) -> None:
    model = models.make_custom_op_model(domain="com.microsoft", op_type="FastGelu")

    meta = inspect_model(models.save(model, tmp_path / "contrib.onnx"))

    assert meta.op_histogram["com.microsoft::FastGelu"] == 1
    assert meta.custom_domains == []
    assert meta.warnings == []


def test_external_data_parameters_are_counted_without_the_data(tmp_path: Path) -> None:
    path = models.save_with_external_data(models.make_cnn(), tmp_path / "ext")
    plain = inspect_model(models.save(models.make_cnn(), tmp_path / "cnn.onnx"))

    meta = inspect_model(path)

    assert meta.parameter_count == plain.parameter_count > 0
    assert external_data_files(onnx.load(str(path), load_external_data=False)) == ["model.data"]


def test_nodes_inside_if_branches_are_counted(tmp_path: Path) -> None:
    def branch(name: str, value: float) -> onnx.GraphProto:
        const = numpy_helper.from_array(np.full((2,), value, np.float32), f"{name}_v")
        return helper.make_graph(
            [helper.make_node("Constant", [], [f"{name}_out"], value=const)],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [2])],
        )

    graph = helper.make_graph(
        [
            helper.make_node(
                "If", ["cond"], ["y"], then_branch=branch("then", 1), else_branch=branch("else", 0)
            )
        ],
        "with_if",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8

    meta = inspect_model(models.save(model, tmp_path / "if.onnx"))

    assert meta.op_histogram == {"Constant": 2, "If": 1}
    assert meta.node_count == 3
    assert meta.inputs == [{"name": "cond", "dtype": "bool", "shape": []}]


def test_shape_inference_failure_is_a_warning_not_a_rejection(tmp_path: Path) -> None:
    weight = numpy_helper.from_array(np.ones((4, 5), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "bad_shapes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8

    meta = inspect_model(models.save(model, tmp_path / "bad_shapes.onnx"))

    assert meta.parameter_count == 20
    assert len(meta.warnings) == 1
    assert meta.warnings[0].startswith("Shape inference failed")


def test_graph_using_an_undefined_tensor_is_rejected(tmp_path: Path) -> None:
    model = models.make_mlp()
    model.graph.node[2].input[0] = "nowhere"
    path = models.save(model, tmp_path / "broken.onnx")

    with pytest.raises(UserError, match="'broken.onnx' is not valid ONNX"):
        inspect_model(path)


def test_truncated_file_is_rejected_as_truncated(mlp_path: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(mlp_path.read_bytes()[:700])

    with pytest.raises(UserError, match="'cut.onnx' is a truncated or damaged ONNX file"):
        inspect_model(cut)
