"""Compat facts name the graph each node sits in as the Graph page names a body's node."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from backend.compat.facts import read_nodes
from backend.models.nodenames import body_nodes


def loop_holding_an_if() -> onnx.ModelProto:
    """Loop_0 whose body holds an unnamed If (then: Identity, else: Neg), then Relu_1 after it."""
    f = TensorProto.FLOAT
    then_branch = helper.make_graph(
        [helper.make_node("Identity", ["v"], ["t"])],
        "then_g",
        [],
        [helper.make_tensor_value_info("t", f, [2])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["v"], ["e"])],
        "else_g",
        [],
        [helper.make_tensor_value_info("e", f, [2])],
    )
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node(
                "If", ["cond_in"], ["v_out"], then_branch=then_branch, else_branch=else_branch
            ),
        ],
        "loop_body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", f, [2]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", f, [2]),
        ],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Loop", ["n", "c", "x"], ["looped"], body=body),
            helper.make_node("Relu", ["looped"], ["y"]),
        ],
        "loop_if",
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", f, [2]),
        ],
        [helper.make_tensor_value_info("y", f, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def test_body_nodes_say_which_body_holds_them_and_top_nodes_say_main() -> None:
    model = loop_holding_an_if()
    graphs = {n.name: n.graph for n in read_nodes(model)}
    assert graphs == {
        "Loop_0": "main",
        "Relu_1": "main",
        "Identity_0": "Loop_0's body",
        "If_1": "Loop_0's body",
        "Identity_0_0": "Loop_0's body, If_1's then_branch",
        "Neg_0": "Loop_0's body, If_1's else_branch",
    }
    # the Graph page's caption for a body's node reads the same words
    assert {b.name: b.where for b in body_nodes(model.graph)} == {
        name: where for name, where in graphs.items() if where != "main"
    }
