"""Static cost: FLOPs of small onnx.helper graphs whose counts are worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from backend.errors import UserError
from backend.models.cost import model_cost
from backend.models.costing import cost_in_child
from backend.models.inspect import inspect_model
from tests import hostile, models


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:  # noqa: ANN001
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _f(name: str, shape: list) -> onnx.ValueInfoProto:  # noqa: ANN001
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def test_conv_relu_counts_two_flops_per_mac_and_one_per_element() -> None:
    # out 1x4x8x8 = 256 elements, each 3x3x3 = 27 MACs: 2 * 256 * 27 = 13,824; Relu 256
    model = _model(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"]),
        ],
        [_f("x", ["N", 3, 8, 8])],
        [_f("y", ["N", 4, 8, 8])],
        [_w("w", 4, 3, 3, 3), _w("b", 4)],
    )
    cost = model_cost(model, batch_size=1)
    conv, relu = cost.nodes
    assert (conv.flops, conv.params, conv.activation_bytes) == (13_824, 112, 1_024)
    assert (relu.flops, relu.params) == (256, 0)
    assert cost.flops == 14_080 and cost.params == 112 and not cost.uncounted_ops
    at_four = model_cost(model, batch_size=4)
    assert at_four.flops == 4 * cost.flops and at_four.flops_per_sample == cost.flops


def test_gemm_matmul_einsum_and_conv_transpose_by_hand() -> None:
    model = _model(
        [
            helper.make_node("Gemm", ["a", "gw", "gb"], ["g"]),  # 2*2*3*5 + bias 6 = 66
            helper.make_node("MatMul", ["m", "mw"], ["mm"]),  # 2 * (2*4*7) * 6 = 672
            helper.make_node("Einsum", ["e1", "e2"], ["ee"], equation="bij,bjk->bik"),  # 240
            helper.make_node("ConvTranspose", ["t", "tw"], ["tt"]),  # 2 * 32 * (3*3*3) = 1,728
        ],
        [_f("a", [2, 5]), _f("m", [2, 4, 6]), _f("e1", [2, 3, 4]), _f("e2", [2, 4, 5])]
        + [_f("t", [1, 2, 4, 4])],
        [_f("g", [2, 3]), _f("mm", [2, 4, 7]), _f("ee", [2, 3, 5]), _f("tt", [1, 3, 6, 6])],
        [_w("gw", 5, 3), _w("gb", 3), _w("mw", 6, 7), _w("tw", 2, 3, 3, 3)],
    )
    flops = {n.op_type: n.flops for n in model_cost(model).nodes}
    assert flops == {"Gemm": 66, "MatMul": 672, "Einsum": 240, "ConvTranspose": 1_728}


def test_unknown_ops_count_zero_and_are_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the symbolic fallback must leave no debugging copy behind
    cost = model_cost(models.make_custom_op_model())
    assert not list(tmp_path.iterdir())
    assert "MyOp" in cost.uncounted_ops
    assert all(n.flops == 0 and not n.counted for n in cost.nodes if n.op_type == "MyOp")


def test_a_free_dimension_without_a_value_is_refused_with_its_name() -> None:
    transformer = models.make_transformer()
    with pytest.raises(UserError, match="seq"):
        model_cost(transformer, batch_size=2)
    assert model_cost(transformer, batch_size=2, dims={"seq": 8}).flops > 0


def test_the_cost_counted_in_a_child_is_the_cost_counted_here(tmp_path: Path) -> None:
    from backend.models.costing import cost_in_child

    path = models.save(models.make_transformer(), tmp_path / "t.onnx")
    here = model_cost(path, 2, {"seq": 16})
    there = cost_in_child(path, 2, {"seq": 16}, "t.onnx")
    assert there == here and there.flops > 0


def test_dimensions_are_capped_before_a_child_and_inputs_over_the_limit_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backend.models.costing import cost_in_child

    path = hostile.cost_bomb(tmp_path / "bomb.onnx")
    with pytest.raises(UserError, match=r"seq = 2,000,000 is outside 0 to 1,048,576"):
        cost_in_child(path, 1, {"seq": 2_000_000}, "bomb.onnx")
    with pytest.raises(UserError, match=r"batch size = 0 is outside"):
        cost_in_child(path, 0, {"seq": 8}, "bomb.onnx")
    monkeypatch.setenv("OPTIBOARD_MAX_INPUT_MB", "1")
    wide = models.save(models.make_symbolic_dim_model(), tmp_path / "wide.onnx")  # float [N, seq]
    with pytest.raises(UserError, match=r"Input 'x' at shape \[2, 1048576\] takes 8 MB"):
        model_cost(wide, 2, {"seq": 1 << 20})
    with pytest.raises(UserError, match=r"over the input limit of 1 MB \(OPTIBOARD_MAX_INPUT"):
        cost_in_child(wide, 2, {"seq": 1 << 20}, "wide.onnx")


def test_weights_read_or_held_only_inside_a_body_count_as_the_models_page_counts_them(
    tmp_path: Path,
) -> None:
    """The walkthrough's If model: `wt` (16x16) is a main-graph initializer read only in the
    then_branch; add one held by the else_branch (16) and one nobody reads (3). Models, CLI and
    the Graph page all say 1 + 256 + 128 + 8 + 16 + 3 = 412; If_2's row carries 256 + 16."""
    model = models.make_unnamed_if()
    else_branch = next(a.g for a in model.graph.node[2].attribute if a.name == "else_branch")
    else_branch.initializer.append(_w("eb", 16))
    else_branch.node[1].input[0] = "e1"
    else_branch.node.insert(1, helper.make_node("Add", ["e0", "eb"], ["e1"]))
    model.graph.initializer.append(_w("spare", 3))
    onnx.checker.check_model(model, full_check=True)
    path = models.save(model, tmp_path / "unnamed_if.onnx")

    cost = cost_in_child(path, 1, {}, "unnamed_if.onnx")  # as the Graph page counts it
    assert cost.params == inspect_model(path).parameter_count == 412
    assert {n.name: n.params for n in cost.nodes}["If_2"] == 256 + 16
    assert model_cost(model).params == 412
