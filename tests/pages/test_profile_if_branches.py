"""The Jobs page's per-node profiles of a model whose unnamed nodes sit inside an If's branches
(the fifth walkthrough's unnamed_if): the tabs agree on which uploaded node each runtime node ran,
the FP32 run is not said to lack an FP32 run, and counts of one read in the singular."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.specs import SweepSpec
from tests import models as model_factory
from tests.pages.seed import open_page, texts
from tests.pages.test_profile_views import QUICK
from tests.workers import run_worker_once


def _unnamed_if() -> onnx.ModelProto:
    """ReduceSum -> Greater -> If (then: Relu, Mul; else: Neg, Sigmoid) -> Relu -> MatMul -> Add,
    every node unnamed: the else branch's nodes are 'Neg_0', 'Sigmoid_1' in their own body."""
    rng = np.random.default_rng(1)

    def init(name: str, value: object) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(value, np.float32), name)

    def branch(name: str, ops: tuple[str, str], out: str) -> onnx.GraphProto:
        first = helper.make_node(ops[0], ["x"], ["b0"])
        second = helper.make_node(ops[1], ["b0", "two"] if ops[1] == "Mul" else ["b0"], [out])
        value = helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", 16])
        return helper.make_graph([first, second], name, [], [value])

    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["cond"]),
        helper.make_node(
            "If",
            ["cond"],
            ["y"],
            then_branch=branch("then_g", ("Relu", "Mul"), "t_out"),
            else_branch=branch("else_g", ("Neg", "Sigmoid"), "e_out"),
        ),
        helper.make_node("Relu", ["y"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["out"]),
    ]
    weights = [init("zero", 0.0), init("two", 2.0)]
    weights += [init("w", rng.normal(0, 0.3, (16, 8))), init("b", rng.normal(0, 0.1, (8,)))]
    graph = helper.make_graph(
        nodes,
        "unnamed_if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 8])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def _diff_nodes(at) -> set[str]:  # noqa: ANN001 - AppTest
    """The uploaded nodes the Against FP32 chart plots."""
    for chart in at.get("plotly_chart"):
        figure = json.loads(chart.proto.spec)
        if figure["layout"]["title"]["text"].startswith("Per uploaded node: FP32 vs"):
            return {y for trace in figure["data"] for y in trace["y"]}
    return set()


def test_if_branch_nodes_map_alike_in_every_tab_and_the_fp32_run_is_named_as_such(
    data_dir: Path, tmp_path: Path
) -> None:
    source = model_factory.save(_unnamed_if(), tmp_path / "unnamed_if.onnx")
    model = ingest_file(source, "unnamed_if.onnx")
    spec = SweepSpec(precisions=("fp32", "int8_static"), profile=True, measure=QUICK)
    job = jobs.submit_sweep(model.id, spec)
    run_worker_once(timeout=300)

    at = open_page("jobs", job=job.id)
    assert not at.exception
    assert at.selectbox(key="profile").value == "CPU FP32 b1"
    said = texts(at)
    assert "CPU FP32 b1 is the FP32 run itself" in said
    assert "No profiled FP32 run of the same provider and batch" not in said

    at.selectbox(key="profile").select_index(1).run()  # the INT8 configuration
    assert not at.exception
    table = next(d.value for d in at.dataframe if "graph" in d.value.columns)
    table = table.astype(object).where(table.notna(), None)  # a blank cell reads None
    uploaded = dict(zip(table["node"], table["uploaded_node"], strict=True))
    plotted = _diff_nodes(at)
    assert plotted, "no Against FP32 chart"
    # whichever branch the profiled feed took, its nodes are traced to no uploaded node (their
    # time is inside If_2's), in both tabs alike
    branch = {n for n in uploaded if n.split("_")[0] in {"Neg", "Sigmoid", "Relu", "Mul"}}
    branch -= {"Relu_3"}  # the main graph's Relu, after the If
    assert branch, uploaded
    inside = dict(zip(table["node"], table["inside"], strict=True))
    for name in branch:
        assert uploaded[name] is None, (name, uploaded)
        assert name not in plotted, (name, plotted)
        assert inside[name] == "If_2", (name, inside)  # shown, its time counted in If_2's
    shares = dict(zip(table["node"], table["share"], strict=True))
    assert sum(shares[n] for n in shares if inside[n] is None) <= 1.0 + 1e-6
    assert shares["If_2"] >= sum(shares[n] for n in branch) - 0.01
    assert "already counted in the share of the node it ran inside" in texts(at)
    mapped = {u for u in uploaded.values() if u is not None}
    assert mapped <= plotted and "If_2" in mapped  # what Hottest names, Against FP32 plots
    assert f"{len(branch)} node" in texts(at) and "traced to no node of the uploaded" in texts(at)

    # one fused kernel (MatMul+Add): the Graph page it links to says so in the singular
    link = next(g for n, g in zip(table["node"], table["graph"], strict=True) if "Fusion" in n)
    query = {k: v[0] for k, v in parse_qs(urlparse(link).query).items()}
    graph = open_page("graph", **query)
    assert not graph.exception
    assert "1 runtime node ran several uploaded nodes as one fused kernel" in texts(graph)
    assert "1 runtime nodes" not in texts(graph)
