"""7-bit INT8 weights (PointKnobs.int8_reduce_range, quantize_* reduce_range): a quantizer knob
declared once. Its weights stay within +-64, so ONNX Runtime's fast U8S8 kernels cannot saturate
on a CPU without VNNI; the runner and the served model know it, and it reaches ONNX Runtime's INT8
points only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from backend import cli
from backend.engine.variants import build_variant
from backend.knobs import columns
from backend.queue import jobs
from backend.runtimes.ort_int8 import choose
from backend.serving.repository import plan_model
from backend.serving.types import BatchingPolicy
from backend.specs import Configuration, Int8Matmul, Precision, SweepSpec
from tests.pages.seed import add_model, open_page

AVX2 = {"avx2": True, "avx512f": False, "avx512_vnni": False, "amx": False}


def _int8_weights(path: Path) -> np.ndarray:
    model = onnx.load(str(path))
    arrays = [
        numpy_helper.to_array(w).ravel()
        for w in model.graph.initializer
        if w.data_type == onnx.TensorProto.INT8
    ]
    return np.concatenate(arrays).astype(np.int16)


def test_seven_bit_weights_stay_within_64_and_the_served_model_needs_no_setting(
    tmp_path: Path, mlp_path: Path
) -> None:
    for precision in (Precision.INT8_STATIC, Precision.INT8_DYNAMIC):
        full = build_variant(mlp_path, Configuration(precision), tmp_path / "full")
        seven = Configuration(precision, int8_reduce_range=True)
        built = build_variant(mlp_path, seven, tmp_path / "seven")
        assert np.abs(_int8_weights(full.path)).max() > 64  # 8-bit: U8S8 sums can saturate
        assert np.abs(_int8_weights(built.path)).max() <= 64
        assert built.path.name.endswith("-w7.onnx") and any("7 bits" in s for s in built.steps)
        assert plan_model(built.path, BatchingPolicy(4)).session_config == ()
    note = choose(Int8Matmul.AUTO, cpu=AVX2, machine="x86_64", seven_bit=True)
    assert not note.exact and note.ran == "u8s8" and "cannot saturate" in note.note


def test_it_reaches_onnx_runtime_int8_points_only_and_keys_them() -> None:
    spec = SweepSpec(
        precisions=(Precision.FP32, Precision.INT8_STATIC, Precision.INT8_DYNAMIC),
        backends=("onnxruntime", "openvino"),
        int8_reduce_range=True,
    )
    points = {(c.backend, c.precision): c for c in spec.configurations()}
    ort_static = points["onnxruntime", Precision.INT8_STATIC]
    assert ort_static.int8_reduce_range and ort_static.key.endswith("/w7")
    assert "7-bit weights" in ort_static.label
    assert points["onnxruntime", Precision.INT8_DYNAMIC].int8_reduce_range
    assert not points["onnxruntime", Precision.FP32].int8_reduce_range  # no int8 weights
    assert not points["openvino", Precision.INT8_STATIC].int8_reduce_range  # NNCF's own
    assert "w7" not in Configuration(Precision.INT8_STATIC).key  # old keys stay as they were
    assert columns(ort_static)["int8_reduce_range"] is True


def test_it_travels_through_json_links_and_flags() -> None:
    spec = SweepSpec(precisions=(Precision.INT8_STATIC,), int8_reduce_range=True)
    assert spec.to_dict()["int8_reduce_range"] is True
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    query = jobs.spec_to_query(spec)
    assert query["reduce_range"] == "1"
    assert jobs.spec_from_query(query) == spec
    assert "reduce_range" not in jobs.spec_to_query(SweepSpec())
    parser = cli.build_parser()
    flagged = cli._spec(parser.parse_args(["submit", "1", "--reduce-range"]))
    assert flagged.int8_reduce_range


def test_the_optimize_page_offers_it_and_submits_it(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    assert at.toggle(key="reduce_range").value is False
    at.toggle(key="reduce_range").set_value(True).run()
    assert at.query_params["reduce_range"] == "1"
    at.button(key="submit_sweep").click().run()
    assert not at.exception
    [job] = jobs.list_jobs()
    assert jobs.spec_of(job).int8_reduce_range
