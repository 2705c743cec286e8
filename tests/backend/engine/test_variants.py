"""Every precision builds a real variant that ONNX Runtime loads and that stays close to FP32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from backend.engine.accuracy import compare_outputs
from backend.engine.inputs import input_specs_of, random_inputs, value_ranges
from backend.engine.variants import (
    OptimizationError,
    build_variant,
    op_histogram,
    save_ort_optimized,
)
from backend.errors import UserError
from backend.specs import Configuration, Precision
from tests import models


def _session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _compare(source: Path, variant: Path, feeds: list[dict[str, np.ndarray]]):
    reference = _session(source)
    candidate = _session(variant)
    return compare_outputs(
        [reference.run(None, f) for f in feeds], [candidate.run(None, f) for f in feeds]
    )


def _feeds(path: Path, batch: int, dims: dict[str, int], count: int = 8):
    return random_inputs(
        input_specs_of(path), batch, dims, count=count, seed=1, ranges=value_ranges(path)
    )


def test_fp32_with_fixed_shapes_fixes_input_and_output_batch(
    cnn_path: Path, tmp_path: Path
) -> None:
    config = Configuration(precision=Precision.FP32, batch_size=4, fixed_shapes=True)
    variant = build_variant(cnn_path, config, tmp_path / "work")
    session = _session(variant.path)
    assert session.get_inputs()[0].shape == [4, 3, 32, 32]
    assert session.get_outputs()[0].shape == [4, 10]
    assert "fixed batch to 4" in variant.steps
    assert variant.size_bytes == variant.path.stat().st_size > 0
    assert _compare(cnn_path, variant.path, _feeds(cnn_path, 4, {})).max_abs_error == 0.0


def test_dynamic_batch_keeps_the_batch_axis_symbolic(cnn_path: Path, tmp_path: Path) -> None:
    config = Configuration(precision=Precision.FP32, batch_size=4, fixed_shapes=False)
    variant = build_variant(cnn_path, config, tmp_path / "work")
    session = _session(variant.path)
    assert session.get_inputs()[0].shape == ["batch", 3, 32, 32]
    for batch in (1, 3):
        (logits,) = session.run(None, _feeds(cnn_path, batch, {}, count=1)[0])
        assert logits.shape == (batch, 10)


def test_transformer_seq_gets_its_value_with_fixed_or_dynamic_batch(
    transformer_path: Path, tmp_path: Path
) -> None:
    fixed = Configuration(precision=Precision.FP32, batch_size=2, symbolic_dims={"seq": 12})
    dynamic = Configuration(
        precision=Precision.FP32, batch_size=2, fixed_shapes=False, symbolic_dims={"seq": 12}
    )
    fixed_variant = build_variant(transformer_path, fixed, tmp_path / "work")
    dynamic_variant = build_variant(transformer_path, dynamic, tmp_path / "work")
    assert _session(fixed_variant.path).get_inputs()[0].shape == [2, 12]
    assert _session(fixed_variant.path).get_outputs()[0].shape == [2, 12, 32]
    assert _session(dynamic_variant.path).get_inputs()[0].shape == ["batch", 12]
    assert "fixed seq=12" in dynamic_variant.steps
    assert fixed_variant.path != dynamic_variant.path


def test_missing_symbolic_dim_is_a_user_error_and_leaves_no_file(
    transformer_path: Path, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    for fixed in (True, False):
        config = Configuration(precision=Precision.FP32, fixed_shapes=fixed)
        with pytest.raises(UserError, match="symbolic dimension 'seq'"):
            build_variant(transformer_path, config, workdir)
    assert list(workdir.iterdir()) == []


def test_fp16_stays_close_to_fp32(cnn_path: Path, tmp_path: Path) -> None:
    config = Configuration(precision=Precision.FP16, batch_size=2)
    variant = build_variant(cnn_path, config, tmp_path / "work")
    weights = {init.data_type for init in onnx.load(str(variant.path)).graph.initializer}
    assert TensorProto.FLOAT16 in weights
    session = _session(variant.path)
    assert session.get_inputs()[0].type == "tensor(float)"  # io types kept
    report = _compare(cnn_path, variant.path, _feeds(cnn_path, 2, {}))
    assert report.max_abs_error < 0.05
    assert report.cosine_similarity > 0.9999
    assert report.top1_agreement == 1.0


def test_fp16_of_an_unconvertible_graph_says_so_and_leaves_no_file(tmp_path: Path) -> None:
    # Cast-to-float64 feeding a float-only op: the converter's output fails to type-check
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["x"], ["x64"], to=TensorProto.DOUBLE),
            helper.make_node("Add", ["x64", "one"], ["y64"]),
            helper.make_node("Cast", ["y64"], ["y"], to=TensorProto.FLOAT),
        ],
        "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor("one", TensorProto.DOUBLE, [4], [1.0] * 4)],
    )
    source = models.save(models._finish(graph), tmp_path / "mixed.onnx")
    config = Configuration(precision=Precision.FP16)
    workdir = tmp_path / "work"
    with pytest.raises(OptimizationError, match="cannot be converted to FP16: .*Type Error"):
        build_variant(source, config, workdir)
    assert list(workdir.iterdir()) == []


def test_int8_dynamic_on_a_conv_net_warns_about_conv_integer(
    cnn_path: Path, tmp_path: Path
) -> None:
    config = Configuration(precision=Precision.INT8_DYNAMIC, batch_size=1)
    variant = build_variant(cnn_path, config, tmp_path / "work")
    ops = op_histogram(onnx.load(str(variant.path)))
    assert ops.get("ConvInteger", 0) == 5
    assert any("ConvInteger" in note for note in variant.notes)
    report = _compare(cnn_path, variant.path, _feeds(cnn_path, 1, {}))
    assert report.cosine_similarity > 0.98


def test_int8_dynamic_on_the_mlp_has_no_conv_note(mlp_path: Path, tmp_path: Path) -> None:
    config = Configuration(precision=Precision.INT8_DYNAMIC, batch_size=4)
    variant = build_variant(mlp_path, config, tmp_path / "work")
    assert variant.notes == []
    report = _compare(mlp_path, variant.path, _feeds(mlp_path, 4, {}))
    assert report.cosine_similarity > 0.99


@pytest.mark.parametrize("fixed", [True, False])
def test_int8_static_with_random_calibration_stays_close_on_the_cnn(
    cnn_path: Path, tmp_path: Path, fixed: bool
) -> None:
    config = Configuration(precision=Precision.INT8_STATIC, batch_size=4, fixed_shapes=fixed)
    variant = build_variant(cnn_path, config, tmp_path / "work")
    ops = op_histogram(onnx.load(str(variant.path)))
    assert ops["QuantizeLinear"] > 0 and ops["DequantizeLinear"] > 0
    assert "random calibration data: accuracy numbers are indicative only" in variant.notes
    assert "quantize_static QDQ per-channel, 16 calibration samples (random)" in variant.steps
    expected = [4, 3, 32, 32] if fixed else ["batch", 3, 32, 32]
    assert _session(variant.path).get_inputs()[0].shape == expected
    report = _compare(cnn_path, variant.path, _feeds(cnn_path, 4, {}))
    assert report.cosine_similarity >= 0.98


def test_int8_static_uses_given_calibration_feeds_at_the_fixed_batch(
    cnn_path: Path, tmp_path: Path
) -> None:
    calibration = _feeds(cnn_path, 1, {}, count=5)
    config = Configuration(
        precision=Precision.INT8_STATIC, batch_size=4, calibration_sha256="ab" * 32
    )
    variant = build_variant(cnn_path, config, tmp_path / "work", calibration=calibration)
    assert "quantize_static QDQ per-channel, 5 calibration samples (from the calibration file)" in (
        variant.steps
    )
    assert variant.notes == []
    report = _compare(cnn_path, variant.path, _feeds(cnn_path, 4, {}))
    assert report.cosine_similarity >= 0.98


def test_int8_static_keeps_attention_in_float_so_the_transformer_stays_close(
    transformer_path: Path, tmp_path: Path
) -> None:
    config = Configuration(precision=Precision.INT8_STATIC, symbolic_dims={"seq": 8})
    variant = build_variant(transformer_path, config, tmp_path / "work")
    assert any(step.startswith("kept attention in FP32 (3 ") for step in variant.steps)
    report = _compare(transformer_path, variant.path, _feeds(transformer_path, 1, {"seq": 8}))
    assert report.cosine_similarity >= 0.99


def test_simplification_records_node_counts_and_never_grows_the_graph(
    mlp_path: Path, tmp_path: Path
) -> None:
    config = Configuration(precision=Precision.FP32, batch_size=4, simplify=True)
    variant = build_variant(mlp_path, config, tmp_path / "work")
    assert variant.node_count_before == 6
    assert variant.node_count_after <= variant.node_count_before
    assert f"simplified with onnxslim: 6 -> {variant.node_count_after} nodes" in variant.steps
    assert _compare(mlp_path, variant.path, _feeds(mlp_path, 4, {})).max_abs_error < 1e-5


def test_unreadable_source_is_a_user_error(tmp_path: Path) -> None:
    source = tmp_path / "broken.onnx"
    source.write_bytes(b"\x00garbage")
    with pytest.raises(UserError, match="cannot be read as an ONNX model"):
        build_variant(source, Configuration(precision=Precision.FP32), tmp_path / "work")
    assert list((tmp_path / "work").iterdir()) == []


def test_ort_optimized_graph_is_saved_for_download(cnn_path: Path, tmp_path: Path) -> None:
    out = save_ort_optimized(cnn_path, "extended", tmp_path / "out" / "cnn.ort.onnx")
    optimized = onnx.load(str(out))
    ops = op_histogram(optimized)
    assert "Relu" not in ops or ops["Relu"] < op_histogram(onnx.load(str(cnn_path)))["Relu"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["cnn.ort.onnx"]
    session = _session(out)
    assert session.run(None, _feeds(cnn_path, 1, {})[0])[0].shape == (1, 10)


def _int8_build_imports_sympy(source: str, work: str) -> bool:
    """In a fresh child: build the INT8 dynamic variant; whether sympy got imported for it."""
    import sys

    config = Configuration(precision=Precision.INT8_DYNAMIC, batch_size=2)
    build_variant(Path(source), config, Path(work))
    return "sympy" in sys.modules


def test_symbolic_shape_inference_runs_only_where_onnx_leaves_a_shape_unknown(
    tmp_path: Path,
) -> None:
    """ORT's symbolic pass imports sympy (0.4 CPU-s a child); where ONNX's own inference knows
    every shape it changes no node or weight ORT's quantizer writes, which is checked here."""
    from backend import ort_tools
    from backend.engine.shapes import shapes_complete
    from backend.launch.children import run_in_child

    ort_tools.without_torch()
    from onnxruntime.quantization import quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    complete = (models.make_mlp, models.make_cnn, models.make_transformer)
    assert all(shapes_complete(make()) for make in complete)
    assert not shapes_complete(models.make_computed_reshape())  # [unk__0, unk__1] after Reshape
    assert not shapes_complete(models.make_named_if())  # subgraphs: the symbolic pass runs
    for make in complete:
        source = tmp_path / f"{make.__name__}.onnx"
        onnx.save(make(), source)
        quantized = []
        for skip in (False, True):
            prepared, out = tmp_path / f"prepared-{skip}.onnx", tmp_path / f"int8-{skip}.onnx"
            quant_pre_process(str(source), str(prepared), skip_symbolic_shape=skip)
            quantize_dynamic(str(prepared), str(out))
            model = onnx.load(out)
            quantized.append((list(model.graph.node), list(model.graph.initializer)))
        assert quantized[0] == quantized[1], make.__name__
    imports = {}
    for make in (models.make_mlp, models.make_computed_reshape):
        source = tmp_path / f"{make.__name__}-child.onnx"
        onnx.save(make(), source)
        work = tmp_path / f"{make.__name__}-work"
        imports[make.__name__] = run_in_child(
            _int8_build_imports_sympy, str(source), str(work), timeout_s=120
        ).value
    assert imports == {"make_mlp": False, "make_computed_reshape": True}
