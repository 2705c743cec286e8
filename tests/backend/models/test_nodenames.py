"""Unnamed nodes get one name everywhere: users type the Graph page's names into "keep in FP32",
and the cost table, the compatibility facts and the profile must find the same node by them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from backend.compat.facts import read_nodes, unique_names
from backend.engine.profile import SourceIndex, name_nodes, profile_model
from backend.engine.variants import build_variant
from backend.graphview.structure import structure_of
from backend.models.cost import model_cost
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration
from tests import models

# the names the Graph page shows: '<op>_<position in graph.node>' for the unnamed, "pool" as named
EXPECTED = {"Conv_0", "Relu_1", "pool", "Flatten_3", "Gemm_4", "Softmax_5"}


def _cnn_with_unnamed_nodes() -> onnx.ModelProto:
    """Conv -> Relu -> GlobalAveragePool (named "pool") -> Flatten -> Gemm -> Softmax."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name)
        for name, shape in (("w", (4, 3, 3, 3)), ("b", (4,)), ("fc_w", (5, 4)), ("fc_b", (5,)))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def test_graph_page_cost_table_compat_facts_and_profile_name_unnamed_nodes_alike(
    tmp_path: Path,
) -> None:
    model = _cnn_with_unnamed_nodes()

    def fresh() -> onnx.ModelProto:  # unique_names and name_nodes name a model in place
        return onnx.ModelProto.FromString(model.SerializeToString())

    graph_page = {node.key for node in structure_of(fresh()).nodes}
    cost_table = {node.name for node in model_cost(fresh()).nodes}
    compat_facts = {facts.name for facts in read_nodes(fresh())}
    placement_names = {node.name for node in unique_names(fresh()).graph.node}
    variant_names = {node.name for node in name_nodes(fresh()).graph.node}
    profile_index = set(SourceIndex.of(fresh()).ops)

    assert graph_page == EXPECTED
    assert cost_table == EXPECTED
    assert compat_facts == EXPECTED
    assert placement_names == EXPECTED
    assert variant_names == EXPECTED
    assert profile_index == EXPECTED

    # and a real ONNX Runtime profile of the built variant maps its kernels back to those names
    source = models.save(model, tmp_path / "cnn.onnx")
    variant = build_variant(source, Configuration(precision="fp32"), tmp_path / "variants")
    feed = {"x": np.random.default_rng(1).random((1, 3, 8, 8), dtype=np.float32)}
    profile = profile_model(variant.path, fresh(), SessionOptions.plain(), feed)
    assert {name for node in profile.nodes for name in node.source_nodes} == EXPECTED


def _if_then_relu() -> onnx.ModelProto:
    """An unnamed If whose branches hold unnamed nodes, then an unnamed Relu in the main graph:
    the bodies' nodes must not shift the main graph's names."""
    out = helper.make_tensor_value_info("o", TensorProto.FLOAT, [2])

    def branch(op: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node(op, ["x"], ["o"])], op.lower(), [], [out])

    nodes = [
        helper.make_node(
            "If", ["cond"], ["i"], then_branch=branch("Relu"), else_branch=branch("Neg")
        ),
        helper.make_node("Relu", ["i"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "control",
        [
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def test_if_bodies_do_not_shift_the_main_graphs_names() -> None:
    model = _if_then_relu()

    def fresh() -> onnx.ModelProto:
        return onnx.ModelProto.FromString(model.SerializeToString())

    main = {"If_0", "Relu_1"}
    assert {node.key for node in structure_of(fresh()).nodes} >= main
    facts = read_nodes(fresh())
    assert {f.name for f in facts if f.graph == "main"} == main
    assert {node.name for node in unique_names(fresh()).graph.node} == main
    assert {node.name for node in name_nodes(fresh()).graph.node} == main
    bodies = {f.name for f in facts if f.graph != "main"}
    assert len(bodies) == 2 and not bodies & main  # the bodies' own names stay unique
    # the Graph page's structure names the bodies' nodes and their body as Compatibility does
    found = {(b.name, b.where, b.holder) for b in structure_of(fresh()).bodies}
    assert found == {(f.name, f.graph, "If_0") for f in facts[1:3]}
    assert {f.graph for f in facts[1:3]} == {"If_0's then_branch", "If_0's else_branch"}


def test_a_bodys_name_taken_by_the_main_graph_is_told_apart_alike() -> None:
    """then_branch's unnamed Relu is Relu_0, the main graph's named one is "Relu_0" too: compat
    facts and the structure both give the body's node the same other name."""
    model = _if_then_relu()
    model.graph.node[1].name = "Relu_0"
    facts = read_nodes(model)
    bodies = {(b.name, b.where) for b in structure_of(model).bodies}
    assert bodies == {(f.name, f.graph) for f in facts[1:3]}
    assert ("Relu_0_0", "If_0's then_branch") in bodies
