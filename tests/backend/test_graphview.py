"""Overlays and variant diffs computed in backend/graphview, on real small graphs with a real
ONNX Runtime profile, the real layer-loss ranking and a real INT8 static (QDQ) variant."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest

from backend import viewer
from backend.engine.evidence import per_source_us
from backend.engine.variants import build_variant
from backend.graphview import overlay as ov
from backend.graphview import structure as st
from backend.graphview.diff import CAST, QDQ, REMOVED, variant_diff
from backend.models import graphread
from backend.models.cost import model_cost
from backend.models.inspect import op_histogram
from backend.reporting.profilecharts import hottest_rows
from backend.specs import Configuration
from tests.graph_evidence import HOSTILE, Evidence, evidence
from tests.models import make_cnn, make_custom_op_model, save, save_with_external_data


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Evidence:
    return evidence("cnn", tmp_path_factory.mktemp("cnn"), hostile=True)


def test_time_overlay_ranks_nodes_as_the_profile_does_and_keeps_names_as_data(
    cnn: Evidence,
) -> None:
    graph = st.read_structure(cnn.source)
    overlay = ov.time_overlay(graph, cnn.profile, "INT8 static")
    per_run = per_source_us(cnn.profile)
    expected = sorted((k for k in per_run if k in graph.by_key()), key=lambda k: -per_run[k])
    assert overlay.ranked()[:3] == expected[:3]
    hottest = overlay.marks[overlay.ranked()[0]]
    assert hottest.fill == ov.SCALE[-1] and "of the profiled time of INT8 static" in hottest.title
    # the profile table's hottest uploaded node is painted in the top bins
    row = next(r for r in hottest_rows(cnn.profile, viewer.focus_keys(cnn.source)) if r["focus"])
    assert overlay.marks[row["uploaded_node"]].fill in ov.SCALE[-2:]
    sent = json.loads(overlay.to_json(graph))
    by_focus = {entry[0]: entry for entry in sent["nodes"]}
    assert by_focus[HOSTILE][3].startswith(HOSTILE)  # a name is a JSON string, never markup
    assert {n.focus for n in graph.nodes} >= set(by_focus)


def test_sqnr_overlay_paints_the_stored_ranking_on_the_uploaded_nodes(cnn: Evidence) -> None:
    graph = st.read_structure(cnn.source)
    overlay = ov.sqnr_overlay(graph, cnn.losses[:10], "INT8 static")
    worst = cnn.losses[0]
    assert overlay.ranked()[0] == worst.node
    assert f"loses {worst.loss_db:.1f} dB of SQNR" in overlay.marks[worst.node].title
    assert len(overlay.marks) == len({loss.node for loss in cnn.losses[:10]})


def test_placement_cost_and_memory_overlays(cnn: Evidence) -> None:
    graph = st.read_structure(cnn.source)
    placed = ov.placement_overlay(graph, cnn.profile, "INT8 static")
    assert [label for _fill, label in placed.legend][0].startswith("CPUExecutionProvider (")
    cost = model_cost(cnn.source)
    flops = ov.cost_overlay(graph, cost, "flops")
    top = max(cost.nodes, key=lambda n: n.flops)
    assert flops.ranked()[0] == top.name and top.op_type == "Conv"
    memory = ov.cost_overlay(graph, cost, "memory")
    assert memory.ranked()[0] == max(cost.nodes, key=lambda n: n.activation_bytes).name
    assert "of output activations" in memory.marks[memory.ranked()[0]].title


def test_int8_diff_counts_add_up_to_both_graphs(cnn: Evidence) -> None:
    diff = variant_diff(st.read_structure(cnn.source), st.read_structure(cnn.int8))
    counts = diff.counts()
    ops = op_histogram(onnx.load(str(cnn.int8)))
    assert counts[QDQ] == ops["QuantizeLinear"] + ops["DequantizeLinear"] > 0
    assert sum(v for k, v in counts.items() if k != REMOVED) == diff.variant_nodes
    assert diff.variant_nodes == sum(ops.values())
    kept_sources = sum(len(c.sources) for c in diff.changes if c.kind in ("kept", "changed op"))
    assert kept_sources + diff.fused_sources() + counts["fused"] + counts[REMOVED] == len(
        onnx.load(str(cnn.source)).graph.node
    )
    overlay = diff.overlay("INT8 static")
    assert sum(m.fill == "#ff7f0e" for m in overlay.marks.values()) == counts[QDQ]


def test_fp16_diff_names_the_casts_it_inserted(tmp_path: Path) -> None:
    source = save(make_cnn(channels=8, blocks=1), tmp_path / "cnn.onnx")
    fp16 = build_variant(source, Configuration(precision="fp16"), tmp_path).path
    diff = variant_diff(st.read_structure(source), st.read_structure(fp16))
    casts = op_histogram(onnx.load(str(fp16))).get("Cast", 0)
    assert diff.counts()[CAST] == casts > 0 and diff.counts()[REMOVED] == 0


def test_structure_never_reads_external_data(tmp_path: Path, monkeypatch) -> None:
    path = save_with_external_data(make_cnn(channels=8, blocks=1), tmp_path / "ext")
    data = tmp_path / "ext" / "model.data"
    data.write_bytes(b"")  # were anything to read the weights, it would fail on this
    data.chmod(0)
    in_process = st.read_structure(path)
    monkeypatch.setattr(graphread, "IN_PROCESS_BYTES", 0)  # a large graph: parsed in a child
    touch_later(path)  # a changed file: not the structure kept for it
    assert st.read_structure(path) == in_process
    assert len(in_process.nodes) == len(onnx.load(str(path), load_external_data=False).graph.node)


def test_viewer_copy_carries_the_overlay_script_and_the_url_names_it(tmp_path: Path) -> None:
    prepared = viewer.prepare_viewer(tmp_path / "netron")
    script = (prepared / viewer.OVERLAY_SCRIPT).read_text()
    assert "innerHTML" not in script and "textContent" in script
    assert "import('./optiboard-overlay.js')" in (prepared / "browser.js").read_text()
    url = viewer.viewer_url("/media/a.bin", "m.onnx", node="n", overlay="/media/o.json")
    assert url.endswith("&node=n&overlay=/media/o.json")


def test_compat_overlay_paints_each_node_by_its_status_on_one_backend(tmp_path: Path) -> None:
    from backend.compat.build import build_matrix
    from backend.compat.cells import CellStatus

    path = save(make_custom_op_model(), tmp_path / "custom.onnx")
    matrix = build_matrix(path, with_placement=False)
    graph = st.read_structure(path)
    for backend in matrix.backends:
        overlay = ov.compat_overlay(graph, matrix, backend)
        custom = next(n.key for n in graph.nodes if n.op_type == "MyOp")
        mark = overlay.marks[custom]
        assert mark.fill == ov.STATUS_COLOURS[CellStatus.UNSUPPORTED][0], (backend, mark)
        assert f"unsupported on {backend}: " in mark.title
        assert len(overlay.marks) == len(graph.nodes)
        assert any(label.startswith("unsupported (1 node)") for _f, label in overlay.legend)


def test_int4_weight_only_diff_names_each_matmul_it_replaced() -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    from backend.engine.profile import name_nodes
    from tests.models import make_transformer

    upload = make_transformer(d_model=64)
    quantizer = MatMulNBitsQuantizer(
        name_nodes(onnx.ModelProto.FromString(upload.SerializeToString())), block_size=32
    )
    quantizer.process()
    variant = quantizer.model.model
    diff = variant_diff(st.structure_of(upload), st.structure_of(variant))
    replaced = op_histogram(variant)["com.microsoft::MatMulNBits"]
    changed = [c for c in diff.changes if c.kind == "changed op"]
    assert len(changed) == replaced > 0
    assert all(c.op_type == "MatMulNBits" and c.source_ops == ("MatMul",) for c in changed)
    assert diff.counts()[REMOVED] == 0 and diff.counts()[QDQ] == 0


def touch_later(path: Path) -> None:
    """Move the file's time on, as a rewrite would."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
