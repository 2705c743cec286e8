"""Reading real node placement from ONNX Runtime's own verbose log."""

from __future__ import annotations

from pathlib import Path

import onnx

from backend.compat.facts import read_nodes, unique_names
from backend.compat.placement import (
    Placement,
    described,
    parse_placement_log,
    placement_from_log,
    read_placement,
)
from backend.launch.children import run_in_child
from backend.runtimes import get_runtime, placement_session
from tests import models as model_factory


def test_placement_of_a_real_cpu_session_lists_every_node(mlp_path):
    placement = read_placement(mlp_path, "cpu")
    assert placement.ok and placement.session_providers == ["CPUExecutionProvider"]
    assert placement.counts == {"CPUExecutionProvider": 6}
    assert sorted(placement.nodes) == sorted(
        ["MatMul_0", "Add_1", "Relu_2", "MatMul_3", "Add_4", "Softmax_5"]
    )
    assert placement.fallbacks() == []


def test_parser_reads_the_real_verbose_log_of_the_runtime(tmp_path, cnn_path):
    named = tmp_path / "named.onnx"
    onnx.save(unique_names(onnx.load(str(cnn_path))), str(named))
    outcome = run_in_child(placement_session, str(named), "CPUExecutionProvider", timeout_s=120)
    assert outcome.ok, outcome.error
    assert outcome.value["error"] is None
    assert "Node placements" in outcome.value["log"]
    nodes, counts, everything_on = parse_placement_log(outcome.value["log"])
    assert everything_on == "CPUExecutionProvider"
    assert counts == {"CPUExecutionProvider": len(onnx.load(str(cnn_path)).graph.node)}


def test_parser_splits_nodes_across_providers_in_the_multi_provider_format():
    # ORT's session_state.cc format when nodes land on more than one provider (GPU hosts).
    log = (
        "2026-01-01 00:00:00.0 [V:onnxruntime:, session_state.cc:1598 "
        "VerifyEachNodeIsAssignedToAnEp] Node placements\n"
        "2026-01-01 00:00:00.0 [V:onnxruntime:, session_state.cc:1641 "
        "VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CUDAExecutionProvider]. "
        "Number of nodes: 2\n"
        "  Conv (conv1)\n"
        "  Relu (relu1)\n"
        "2026-01-01 00:00:00.0 [V:onnxruntime:, session_state.cc:1641 "
        "VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CPUExecutionProvider]. "
        "Number of nodes: 1\n"
        "  NonMaxSuppression (nms)\n"
        "2026-01-01 00:00:00.0 [V:onnxruntime:, session_state.cc:99 Other] done\n"
    )
    nodes, counts, everything_on = parse_placement_log(log)
    assert everything_on is None
    assert counts == {"CUDAExecutionProvider": 2, "CPUExecutionProvider": 1}
    assert nodes == {
        "conv1": "CUDAExecutionProvider",
        "relu1": "CUDAExecutionProvider",
        "nms": "CPUExecutionProvider",
    }


def test_cuda_placement_is_real_on_a_gpu_and_an_announced_cpu_fallback_elsewhere(mlp_path):
    cuda_works = get_runtime("onnxruntime").provider_status("cuda").available
    placement = read_placement(mlp_path, "cuda")
    assert placement.ok
    assert placement.requested_active == cuda_works
    if cuda_works:
        assert "CUDAExecutionProvider" in set(placement.nodes.values())
        assert len(placement.fallbacks()) < 6
    else:  # said as such, never read as six nodes CUDA sent back to the CPU
        assert set(placement.nodes.values()) == {"CPUExecutionProvider"}
        assert len(placement.fallbacks()) == 6
        assert described(placement.to_dict()) == (
            "CUDAExecutionProvider did not start in the session, which got CPUExecutionProvider: "
            "CPUExecutionProvider: 6"
        )


def test_parser_reads_real_cuda_placement_with_a_cpu_fallback():
    """ORT 1.31.1 (onnxruntime-gpu) on an H200 logged this for make_cuda_fallback_model()."""
    log = (Path(__file__).parent / "data" / "ort_1.31.1_cuda_h200_placement.log").read_text()
    nodes, counts, everything_on = parse_placement_log(log)
    assert everything_on is None
    assert counts == {"CPUExecutionProvider": 1, "CUDAExecutionProvider": 4}
    assert nodes["Hardmax_1"] == "CPUExecutionProvider"
    assert nodes["Relu_0"] == nodes["Add_2"] == "CUDAExecutionProvider"
    assert nodes["Memcpy"] == "CUDAExecutionProvider"  # the copies ORT inserted around Hardmax


def test_a_session_that_cannot_load_reports_the_runtimes_own_reason(tmp_path):
    model = model_factory.make_custom_op_model("com.acme", "MyOp")
    path = model_factory.save(model, tmp_path / "custom.onnx")
    placement = read_placement(path, "cpu")
    assert not placement.ok
    assert "MyOp" in placement.error and placement.nodes == {}


def test_a_cuda_placement_counts_the_graphs_nodes_and_the_copies_ort_put_between_devices():
    """A 3-node graph read as 'CUDA: 4, CPU: 1' before: ORT counts its two Memcpy nodes."""
    log = (Path(__file__).parent / "data" / "ort_1.31.1_cuda_h200_placement.log").read_text()
    names = [f.name for f in read_nodes(model_factory.make_cuda_fallback_model())]
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    placement = placement_from_log("CUDAExecutionProvider", providers, log, names)
    assert placement.counts == {"CPUExecutionProvider": 1, "CUDAExecutionProvider": 2}
    assert sum(placement.counts.values()) == len(names) == 3
    assert placement.inserted == 2 and "Memcpy" not in placement.nodes
    assert placement.fallbacks() == ["Hardmax_1"]
    line = described(Placement.from_dict(placement.to_dict()).to_dict())
    assert "CUDAExecutionProvider: 2" in line and "CPUExecutionProvider: 1" in line
    assert line.endswith(" (+2 copies ONNX Runtime put between devices)")


def test_a_placement_stored_before_copies_were_counted_apart_still_reads():
    stored = {"requested": "CPUExecutionProvider", "counts": {"CPUExecutionProvider": 6}}
    assert described(Placement.from_dict(stored).to_dict()) == "CPUExecutionProvider: 6"
