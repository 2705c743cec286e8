"""A fused runtime kernel's time lands on every uploaded node it ran, mostly on its Conv.

ONNX Runtime fuses each Conv + Relu of a ResNet-style CNN into one kernel named after the Relu's
output tensor ('x0_nchwc'); OpenVINO fuses them into one Convolution layer. The Graph page's time
overlay, the per-node split and the Jobs page's hottest-node rows must name the Conv, never the
Relu, as where the time goes. Real profiles of a real CNN (unnamed nodes, and named ones)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from backend import viewer
from backend.engine.evidence import per_source_us
from backend.engine.ovprofile import profile_openvino
from backend.engine.profile import Profile, name_nodes, profile_model
from backend.graphview import overlay as ov
from backend.graphview import structure as st
from backend.reporting.profilecharts import hottest_rows
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration
from tests.models import make_cnn, save

FEED = {"input": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)}


def _cnn(folder: Path, named: bool) -> Path:
    model = make_cnn(channels=32, blocks=2, image=32)
    assert not any(n.name for n in model.graph.node)  # the walkthrough's graph: no node names
    return save(name_nodes(model) if named else model, folder / f"cnn_{named}.onnx")


def _profile(path: Path, runtime: str) -> Profile:
    source = onnx.load(str(path))
    if runtime == "openvino":
        options = SessionOptions(Configuration("fp32", backend="openvino", provider="cpu"))
        return profile_openvino(path, source, options, FEED, runs=5)
    return profile_model(path, source, SessionOptions.plain(), FEED, runs=5)


def _fused_pairs(path: Path) -> list[tuple[str, str]]:
    """(Conv, the Relu right after it) in the uploaded graph, by the names profiles give."""
    graph = name_nodes(onnx.load(str(path))).graph
    producer = {t: n for n in graph.node for t in n.output}
    return [
        (producer[n.input[0]].name, n.name)
        for n in graph.node
        if n.op_type == "Relu" and producer[n.input[0]].op_type == "Conv"
    ]


@pytest.mark.parametrize(
    ("runtime", "named"),
    [("onnxruntime", False), ("onnxruntime", True), ("openvino", False)],
)
def test_fused_conv_relu_time_is_painted_on_the_conv(
    tmp_path: Path, runtime: str, named: bool
) -> None:
    path = _cnn(tmp_path, named)
    profile = _profile(path, runtime)
    pairs = _fused_pairs(path)
    assert len(pairs) == 3  # the stem and each block's first Conv + Relu
    # every Conv+Relu ran as one runtime node, which is traced to both of them
    for conv, relu in pairs:
        kernel = [n for n in profile.nodes if conv in n.source_nodes and n.op_type != "Reorder"]
        assert kernel and any(relu in n.source_nodes for n in kernel), (conv, relu)
    graph = st.read_structure(path)
    overlay = ov.time_overlay(graph, profile, "FP32")
    ops = {n.key: n.op_type for n in graph.nodes}
    convs = [k for k, op in ops.items() if op == "Conv"]
    assert set(convs) <= set(overlay.marks)  # every Conv is painted
    ranked = overlay.ranked()
    relus = [k for k in ranked if ops[k] == "Relu"]
    assert ranked.index(relus[0]) > max(ranked.index(c) for c in convs)  # below every Conv
    per_run = per_source_us(profile)
    for conv, relu in pairs:
        assert per_run[conv] > 10 * per_run.get(relu, 0.0)  # FLOPs: 2*32*9 per output vs 1
        assert overlay.marks.get(relu, ov.Mark(*ov.SCALE[:1], *ov.INK[:1], "")).fill == ov.SCALE[0]
        assert "fused with" in overlay.marks[conv].title and relu in overlay.marks[conv].title
    top_bins = [k for k, m in overlay.marks.items() if m.fill in ov.SCALE[-2:]]
    assert top_bins and not [k for k in top_bins if ops[k] in ("Relu", "Add")]
    assert "split among all the nodes it ran by their FLOPs" in overlay.note
    # the Jobs page's hottest rows link each fused kernel to its Conv, not its Relu
    rows = hottest_rows(profile, viewer.focus_keys(path))
    linked = [r["uploaded_node"] for r in rows if r["uploaded_node"] in dict(pairs).values()]
    assert not linked, linked


def test_a_profile_stored_before_fusions_were_traced_says_so(tmp_path: Path) -> None:
    path = _cnn(tmp_path, named=False)
    stored = _profile(path, "onnxruntime").to_dict()
    assert stored["fusions_traced"] is True and stored["source_flops"]
    del stored["fusions_traced"], stored["source_flops"]  # what a profile stored earlier lacks
    old = Profile.from_dict(stored)
    note = ov.time_overlay(st.read_structure(path), old, "FP32").note
    assert "stored before fused kernels were traced" in note


def test_int8_kernels_that_ran_conv_and_relu_count_as_quantized_convs(tmp_path: Path) -> None:
    """ORT's QLinearConv of an INT8 static variant runs the Conv and the Relu the Q/DQ folded
    into it: the evidence counts it as a quantized Conv (not 'no int8 kernel here')."""
    from backend.engine.evidence import _quantized_sources
    from backend.engine.variants import build_variant

    path = _cnn(tmp_path, named=False)
    config = Configuration("int8_static", calibration_samples=4)
    variant = build_variant(path, config, tmp_path / "int8").path
    profile = profile_model(variant, onnx.load(str(path)), SessionOptions.plain(), FEED, runs=5)
    convs = {conv for conv, _relu in _fused_pairs(path)}
    fused = [n for n in profile.nodes if set(n.source_nodes) & convs and len(n.source_ops) > 1]
    assert fused and all(profile.main_source(n) in {(c, "Conv") for c in convs} for n in fused)
    assert convs <= _quantized_sources(profile)["Conv"]
    assert not _quantized_sources(profile).get("Relu")
