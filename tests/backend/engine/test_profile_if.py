"""Profiles of models with control flow, on real ONNX Runtime sessions: ORT writes the event of
each node of an If's (Loop's) branch from inside the If's own event, whose time already holds
it, so a branch node's time is counted once, as part of its If's, never beside it."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from backend.engine.ovprofile import profile_openvino
from backend.engine.profile import Profile, build_profile, profile_model, trace_events
from backend.reporting import profilecharts
from backend.reporting.regression import profile_diff
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, Precision
from tests import models as model_factory

SIDE = 192  # the then branch's MatMul: heavy enough to be most of the If's time
THEN = ("then_matmul", "then_tanh")
ELSE = ("else_neg",)


def _if_model() -> onnx.ModelProto:
    return model_factory.make_named_if(SIDE)


@pytest.fixture
def if_path(tmp_path: Path) -> Path:
    return model_factory.save(_if_model(), tmp_path / "if_shares.onnx")


def _feed() -> dict[str, np.ndarray]:
    """Positive: the then branch (MatMul, Tanh) runs."""
    return {"x": np.random.default_rng(0).random((64, SIDE), dtype=np.float32) + 0.1}


def _top(profile: Profile) -> list:
    """The main graph's runtime nodes, by the names the model gives its branch nodes."""
    return [n for n in profile.nodes if n.name not in THEN + ELSE]


def test_if_branch_nodes_are_counted_once_inside_their_if(if_path: Path) -> None:
    profile = profile_model(if_path, onnx.load(str(if_path)), SessionOptions.plain(), _feed())
    by_name = {n.name: n for n in profile.nodes}
    assert set(THEN) <= set(by_name) and not set(ELSE) & set(by_name)  # the then branch ran
    assert by_name["if"].op_type == "If"
    branch = [by_name[name] for name in THEN]

    # the total is the main graph's nodes once each: their shares make the whole
    top = _top(profile)
    assert profile.total_us == pytest.approx(sum(n.total_us for n in top))
    assert sum(profile.share([n]) for n in top) == pytest.approx(1.0)
    assert profile.share(profile.nodes) == pytest.approx(1.0)
    # the If's time holds its branch's: picking both counts the If alone
    assert by_name["if"].total_us >= 0.9 * sum(n.total_us for n in branch)
    assert profile.share([by_name["if"], *branch]) == pytest.approx(profile.share([by_name["if"]]))
    # by op type, each node's own time: the MatMul and Tanh count there, the If its overhead
    rows = profile.by_op_type()
    assert sum(row["share"] for row in rows.values()) == pytest.approx(1.0, abs=0.01)
    assert rows["MatMul"]["share"] == pytest.approx(profile.share([by_name[THEN[0]]]))
    assert rows["If"]["total_us"] == pytest.approx(profile.own_us(by_name["if"]))

    # Hottest nodes: every node still listed with its time, a branch node named inside its If
    hottest = {r["node"]: r for r in profilecharts.hottest_rows(profile, {}, count=20)}
    assert set(hottest) == set(by_name)
    for name in THEN:
        assert hottest[name]["inside"] == "if"
        assert hottest[name]["uploaded_node"] is None  # no main-graph node: its time is the If's
        assert 0 < hottest[name]["share"] <= hottest["if"]["share"]
    assert all(hottest[n.name]["inside"] is None for n in top)
    assert hottest["if"]["share"] >= sum(hottest[name]["share"] for name in THEN) - 0.01
    assert hottest["if"]["own_share"] == pytest.approx(
        max(hottest["if"]["share"] - sum(hottest[name]["share"] for name in THEN), 0.0)
    )
    assert sum(r["share"] for r in hottest.values() if r["inside"] is None) == pytest.approx(1.0)
    assert sum(r["own_share"] for r in hottest.values()) <= 1.0 + 0.01
    # an If diffed against itself moves no op type (the branch MatMul is not in the If twice)
    assert all(change.delta_us == 0 for change in profile_diff(profile, profile).changes)


def test_the_node_total_is_no_more_than_the_runs_it_was_measured_in(if_path: Path) -> None:
    """The session's real total: every profiled run (ORT's model_run event) holds its nodes,
    so their time per run, each counted once, is within the run's; counting the branch's
    MatMul again beside the If passed it."""
    source = onnx.load(str(if_path))
    events, optimized = trace_events(if_path, SessionOptions.plain(), _feed())
    profile = build_profile(events, "CPUExecutionProvider", optimized, source, source, _feed())
    runs = sorted(
        (e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
        key=lambda e: e["ts"],
    )[1:]  # the warm-up run left out, as the profile does
    assert len(runs) == profile.runs
    run_us = statistics.median(float(e["dur"]) for e in runs)
    assert profile.total_us / profile.runs <= run_us
    matmul = next(n for n in profile.nodes if n.name == THEN[0])
    assert matmul.parent == "if" and matmul.per_run_us > 0.2 * run_us  # the test means it


def _loop_of_if() -> onnx.ModelProto:
    """Loop (3 trips; body: ReduceSum -> Greater -> If (then: MatMul; else: Neg)) -> Relu: an If
    inside a Loop's body, every node named."""
    rng = np.random.default_rng(4)

    def value(name: str, kind: int = TensorProto.FLOAT, shape: list | None = None) -> object:
        return helper.make_tensor_value_info(name, kind, ["N", SIDE] if shape is None else shape)

    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["v", "wt"], ["t_out"], name="body_matmul")],
        "then_g",
        [],
        [value("t_out")],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["v"], ["e_out"], name="body_neg")], "else_g", [], [value("e_out")]
    )
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_keep"),
            helper.make_node("ReduceSum", ["v"], ["s"], keepdims=0, name="body_sum"),
            helper.make_node("Greater", ["s", "zero"], ["c"], name="body_positive"),
            helper.make_node(
                "If", ["c"], ["v_out"], then_branch=then_g, else_branch=else_g, name="body_if"
            ),
        ],
        "body",
        [value("i", TensorProto.INT64, []), value("cond_in", TensorProto.BOOL, []), value("v")],
        [value("cond_out", TensorProto.BOOL, []), value("v_out")],
    )
    nodes = [
        helper.make_node("Loop", ["trips", "go", "x"], ["y"], body=body, name="loop"),
        helper.make_node("Relu", ["y"], ["out"], name="relu"),
    ]
    weights = [
        numpy_helper.from_array(np.array(3, np.int64), "trips"),
        numpy_helper.from_array(np.array(True), "go"),
        numpy_helper.from_array(np.zeros((), np.float32), "zero"),
        numpy_helper.from_array(np.abs(rng.normal(0, 0.1, (SIDE, SIDE))).astype(np.float32), "wt"),
    ]
    graph = helper.make_graph(nodes, "loop_if", [value("x")], [value("out")], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def test_an_if_inside_a_loop_counts_each_node_once_at_every_level(tmp_path: Path) -> None:
    path = model_factory.save(_loop_of_if(), tmp_path / "loop_if.onnx")
    source = onnx.load(str(path))
    events, optimized = trace_events(path, SessionOptions.plain(), _feed())
    profile = build_profile(events, "CPUExecutionProvider", optimized, source, source, _feed())
    parent = {n.name: n.parent for n in profile.nodes}
    assert parent["loop"] == "" and parent["relu"] == ""
    assert parent["body_sum"] == parent["body_if"] == "loop"  # the body, 3 calls a run
    assert parent["body_matmul"] == "body_if"  # positive weights: the then branch every trip
    assert next(n for n in profile.nodes if n.name == "body_matmul").calls == 3 * profile.runs
    top = [n for n in profile.nodes if n.name in ("loop", "relu")]
    assert profile.total_us == pytest.approx(sum(n.total_us for n in top))
    assert sum(row["share"] for row in profile.by_op_type().values()) == pytest.approx(
        1.0, abs=0.01
    )
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    run_us = statistics.median(float(e["dur"]) for e in sorted(runs, key=lambda e: e["ts"])[1:])
    assert profile.total_us / profile.runs <= run_us


def test_openvino_times_the_if_as_one_layer_with_no_branch_layers_beside_it(if_path: Path) -> None:
    """OpenVINO's counters name no layer of an If's bodies, only the If: nothing to fold there,
    and its shares make the whole as they are."""
    options = SessionOptions(Configuration(Precision.FP32, backend="openvino"))
    profile = profile_openvino(if_path, onnx.load(str(if_path)), options, _feed(), runs=3)
    names = {n.name for n in profile.nodes}
    assert "if" in names and not names & set(THEN + ELSE)
    assert all(n.parent == "" for n in profile.nodes)
    assert sum(profile.share([n]) for n in profile.nodes) == pytest.approx(1.0)
