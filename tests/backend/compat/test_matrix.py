"""The compatibility matrix on small real models with known outcomes, against real sessions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import onnxruntime
from onnx import TensorProto, helper

from backend.compat import build_matrix, matrix_for_model
from backend.compat import export as compat_export
from backend.compat.registry import load_registry
from storage.artifacts import ArtifactStore
from storage.repo import caches as compat_cache
from storage.repo import models as model_store
from storage.repo.models import NewArtifact
from tests import models as model_factory

CPU, CUDA, TRT_EP, TRT, OPENVINO, TFTRT = (
    "ort-cpu",
    "ort-cuda",
    "ort-tensorrt",
    "tensorrt",
    "openvino",
    "tf-trt",
)


def _cuda_source_prefix() -> str:
    """A GPU build answers the CUDA column from its kernel registry, a CPU build from the list."""
    if "CUDAExecutionProvider" in load_registry().providers:
        return "registry: onnxruntime"
    return "list: ONNX Runtime CUDAExecutionProvider"


def _single_op(path: Path, op: str, dtype: int, opset: int = 17, domain: str = "") -> Path:
    node = helper.make_node(op, ["x"], ["y"], domain=domain)
    graph = helper.make_graph(
        [node],
        f"{op.lower()}_model",
        [helper.make_tensor_value_info("x", dtype, [2, 3])],
        [helper.make_tensor_value_info("y", dtype, [2, 3])],
    )
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _by_backend(matrix, index: int = 0) -> dict:
    return {b: matrix.cell(b, index) for b in matrix.backends}


def test_mlp_runs_on_every_backend_and_real_cpu_placement_agrees(data_dir, mlp_path):
    matrix = build_matrix(mlp_path)
    summary = {s.backend: s for s in compat_export.summary(matrix)}
    assert summary[CPU].share == 1.0 and summary[CPU].unsupported == 0
    assert all(c.source.startswith("registry: onnxruntime") for c in matrix.cells[CPU])
    assert matrix.cell(CPU, 0).reason.startswith("CPU kernel MatMul")
    placement = matrix.placements[CPU]
    assert placement.ok and placement.requested_active
    assert set(placement.nodes) == {n.name for n in matrix.nodes}
    assert set(placement.nodes.values()) == {"CPUExecutionProvider"}
    assert summary[CPU].fallbacks == 0
    assert matrix.cell(CUDA, 0).source.startswith(_cuda_source_prefix())
    assert summary[TFTRT].applicable is False and "SavedModel" in summary[TFTRT].note


def test_a_provider_that_did_not_start_counts_no_fallback_and_says_it_did_not_start(
    data_dir, mlp_path
):
    """A CUDA session that got only the CPU (here: no CUDA; on the H100: its libraries not
    loaded) read as 'fall back 25' of 25 nodes; it sends nothing back, it never started."""
    from backend.compat.placement import described, read_placement

    placement = read_placement(mlp_path, "cuda")
    if placement.requested_active:
        return  # a GPU host: the session has CUDA, its fallbacks are real
    matrix = build_matrix(
        mlp_path, placements={CPU: read_placement(mlp_path, "cpu"), CUDA: placement}
    )
    summary = {s.backend: s for s in compat_export.summary(matrix)}
    assert summary[CUDA].fallbacks == summary[CUDA].unsupported == 0  # the prediction's count
    assert described(summary[CUDA].placement).startswith(
        "CUDAExecutionProvider did not start in the session, which got CPUExecutionProvider"
    )


def test_node_with_no_kernel_for_its_type_is_unsupported_and_the_real_session_fails(
    data_dir, tmp_path
):
    path = _single_op(tmp_path / "relu_bf16.onnx", "Relu", TensorProto.BFLOAT16)
    matrix = build_matrix(path)
    cells = _by_backend(matrix)
    assert cells[CPU].status == "unsupported"
    assert cells[CPU].reason.startswith("no bfloat16 kernel for Relu on CPU")
    assert "its ONNX function needs Max" in cells[CPU].reason  # inlining would not help either
    # ORT's CUDA kernels include Relu 14+ for bfloat16 (published list or the GPU build's registry)
    assert cells[CUDA].status == "supported"
    assert cells[CUDA].source.startswith(_cuda_source_prefix())
    placement = matrix.placements[CPU]
    assert not placement.ok
    assert "Could not find an implementation for Relu(14)" in placement.error
    summary = {s.backend: s for s in compat_export.summary(matrix)}
    assert summary[CPU].share == 0.0
    assert summary[CPU].placement["error"] == placement.error


def test_float16_node_without_cpu_kernel_is_partial_because_ort_casts_it(data_dir, tmp_path):
    path = _single_op(tmp_path / "sin_fp16.onnx", "Sin", TensorProto.FLOAT16)
    matrix = build_matrix(path)
    cell = matrix.cell(CPU, 0)
    assert cell.status == "partial"
    assert "no float16 kernel for Sin" in cell.reason and "casts it to float32" in cell.reason
    assert matrix.placements[CPU].ok  # the real session does load it
    assert matrix.cell(CUDA, 0).status == "supported"
    assert any("FP32" in s for s in compat_export.summary(matrix)[0].suggestions)


def test_custom_domain_op_is_unsupported_on_every_backend(data_dir, tmp_path):
    path = _single_op(tmp_path / "acme.onnx", "Frobnicate", TensorProto.FLOAT, domain="com.acme")
    matrix = build_matrix(path)
    for backend, cell in _by_backend(matrix).items():
        assert cell.status == "unsupported", backend
        assert cell.reason == (
            "custom domain 'com.acme': no backend has a kernel; register a custom-op library"
        )
    assert not matrix.placements[CPU].ok
    suggestions = compat_export.summary(matrix)[0].suggestions
    assert "register a custom-op library for 'com.acme' (1 node)" in suggestions


def test_old_opset_is_rejected_by_tensorrt_with_an_opset_fix(data_dir, tmp_path):
    model = model_factory.make_mlp()
    model.opset_import[0].version = 8
    path = tmp_path / "mlp8.onnx"
    onnx.save(model, str(path))
    matrix = build_matrix(path, with_placement=False)
    for backend in (TRT, TRT_EP):
        cell = matrix.cell(backend, 0)
        assert cell.status == "unsupported"
        assert "parses opset 9-24; this model is opset 8" in cell.reason
        assert cell.fix == "change opset: convert the model to opset 9"
    assert "hands it to CUDA/CPU" in matrix.cell(TRT_EP, 0).reason
    assert matrix.cell(OPENVINO, 0).status == "supported"
    assert matrix.placements == {}


def test_savedmodel_uploads_get_a_tftrt_column(data_dir, mlp_path):
    matrix = build_matrix(mlp_path, model_format="savedmodel", with_placement=False)
    assert TFTRT in matrix.backends
    assert matrix.cell(TFTRT, 0).status == "unknown"
    assert "TF-TRT converts TensorFlow ops" in matrix.cell(TFTRT, 0).reason


def _stored_model(path: Path, name: str) -> int:
    stored = ArtifactStore().put_file(path)
    row = model_store.create_model(
        name=name,
        sha256=stored.sha256,
        format="onnx",
        size_bytes=stored.size_bytes,
        metadata={"opset": 17},
        artifacts=[NewArtifact("original", stored.sha256, stored.size_bytes, f"{name}.onnx")],
    )
    return row.id


def test_library_model_matrix_is_cached_and_exports_csv_and_json(data_dir, cnn_path):
    model_id = _stored_model(cnn_path, "cnn")
    first = matrix_for_model(model_id)
    sha = model_store.get_model(model_id).sha256
    assert compat_cache.get_compat(sha, first.fingerprint) is not None
    again = matrix_for_model(model_id)
    assert again.to_dict() == first.to_dict()

    lines = compat_export.to_csv(first).strip().splitlines()
    assert lines[0].startswith("node,index,op_type,domain,op_version")
    assert len(lines) == 1 + len(first.nodes) * len(first.backends)
    exported = json.loads(compat_export.to_json(first))
    assert {s["backend"] for s in exported["summary"]} >= {CPU, CUDA, TRT, OPENVINO}
    assert exported["nodes"][0]["op_type"] == "Conv"
    assert exported["cells"][CPU][0]["status"] == "supported"  # the string caches store
    installed = rf"onnxruntime(-gpu)? {re.escape(onnxruntime.__version__)};"
    assert re.search(installed, first.fingerprint) and "tensorrt:" in first.fingerprint


def test_frame_has_one_row_per_node_and_backend_with_real_placement(data_dir, cnn_path):
    matrix = build_matrix(cnn_path)
    frame = compat_export.to_frame(matrix)
    assert len(frame) == len(matrix.nodes) * len(matrix.backends)
    cpu_rows = frame[frame["backend"] == CPU]
    assert (cpu_rows["placed_on"] == "CPUExecutionProvider").all()
    assert set(cpu_rows["input_types"].iloc[:1]) == {"float, float, float"}
    ops = compat_export.op_frame(matrix)
    conv = ops[(ops["op"] == "Conv") & (ops["backend"] == CPU)]
    assert int(conv["nodes"].iloc[0]) == 5


def test_unreadable_registry_falls_back_to_the_real_cpu_session(mlp_path):
    """Seen on an H200: the registry dump crashed, so the CPU column came from placement."""
    from backend.compat.cells import CellStatus, CompatCell
    from backend.compat.columns.ort_cpu import cells_from_placement
    from backend.compat.facts import read_nodes
    from backend.compat.placement import read_placement

    model = onnx.load(str(mlp_path))
    nodes = read_nodes(model)
    unknown = [
        CompatCell(CellStatus.UNKNOWN, "kernel registry unreadable", "registry") for _ in nodes
    ]
    placement = read_placement(mlp_path, "cpu")
    cells = cells_from_placement(nodes, unknown, placement, "child crashed (signal 11)")
    assert [c.status for c in cells] == ["supported"] * len(nodes)
    assert all(c.source == "placement" and "signal 11" in c.reason for c in cells)


def test_a_generation_models_decoder_gets_its_matrix_and_real_placement(data_dir, tmp_path):
    """The walkthrough's Llama: Graph drew its model.onnx while Compatibility refused it as "a
    folder of files". Its decoder is placed from its GenAI folder, external weights beside it."""
    from backend.models.ingest import ingest_file
    from tests import llm_models

    upload = llm_models.genai_zip(tmp_path)
    row = ingest_file(upload, upload.name)
    matrix = matrix_for_model(row.id)
    ops = {n.op_type for n in matrix.nodes}
    assert {"GroupQueryAttention", "MatMul"} <= ops
    gqa = [i for i, n in enumerate(matrix.nodes) if n.op_type == "GroupQueryAttention"]
    assert len(gqa) == llm_models.TINY.layers
    placement = matrix.placements[CPU]
    assert placement.ok and set(placement.counts) == {"CPUExecutionProvider"}
    assert all(matrix.cell(CPU, i).status == "supported" for i in gqa)
    # every node, SimplifiedLayerNormalization (ONNX Runtime's own, no ONNX schema) included
    assert {matrix.cell(CPU, i).status for i in range(len(matrix.nodes))} == {"supported"}


def test_an_op_onnx_runtime_defines_in_the_default_domain_is_matched_by_its_kernel(tmp_path):
    """The re-walk's Llama: SimplifiedLayerNormalization (no ONNX schema; ONNX Runtime's own,
    in the default domain) was "unknown" on the CPU column while the real session ran it there."""
    node = helper.make_node(
        "SimplifiedLayerNormalization", ["x", "scale"], ["y"], axis=-1, epsilon=1e-5
    )
    graph = helper.make_graph(
        [node],
        "rms",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor("scale", TensorProto.FLOAT, [4], [1.0] * 4)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "rms.onnx"
    onnx.save(model, path)
    matrix = build_matrix(path)
    cell = matrix.cell(CPU, 0)
    assert cell.status == "supported" and "ONNX Runtime's own op" in cell.reason
    assert matrix.placements[CPU].counts == {"CPUExecutionProvider": 1}
