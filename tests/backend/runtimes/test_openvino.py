"""The OpenVINO runtime for real, on small real models: precision asked = precision read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend.engine.accuracy import compare_outputs
from backend.engine.ovprofile import kernel_precision
from backend.engine.run import ConfigurationTask, run_configuration
from backend.engine.variants import build_variant
from backend.errors import UnavailableError
from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions
from backend.specs import (
    MEASURE_PRESETS,
    Configuration,
    OpenVinoOptions,
    PerformanceHint,
    Precision,
)

pytest.importorskip("openvino")

FEEDS = [
    {"input": np.random.default_rng(seed).normal(size=(1, 3, 32, 32)).astype(np.float32)}
    for seed in range(4)
]


def _reference(path: Path) -> list[list[np.ndarray]]:
    with get_runtime("onnxruntime").open(
        path, SessionOptions(Configuration(Precision.FP32))
    ) as runner:
        return [runner.infer(feed) for feed in FEEDS]


def _run(path: Path, precision: Precision) -> tuple[list, dict, list]:
    options = SessionOptions(Configuration(precision, backend="openvino"))
    with get_runtime("openvino").open(path, options) as runner:
        outputs = [runner.infer(feed) for feed in FEEDS]
        return outputs, dict(runner.facts), runner.layer_profile()


def _bf16_reason() -> str | None:
    return get_runtime("openvino").precision_unavailable(Precision.BF16, "cpu")


def test_fp32_is_true_f32_and_equals_the_reference(cnn_path: Path) -> None:
    outputs, facts, profile = _run(cnn_path, Precision.FP32)
    assert facts["execution_precision"] == "f32"
    assert set(facts["layer_precisions"]) <= {"f32", "i32", "i64"}  # no bf16 layer slipped in
    assert facts["execution_devices"] == ["CPU"]
    for got, want in zip(outputs, _reference(cnn_path), strict=True):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
    conv = [layer for layer in profile if layer["type"] == "Convolution"]
    assert conv and all(layer["exec_type"].endswith("f32") for layer in conv)


def test_bf16_runs_in_bf16_within_its_bound_or_says_why_not(cnn_path: Path) -> None:
    reason = _bf16_reason()
    if reason is not None:  # a CPU without BF16: refused with the capabilities it has
        assert "BF16" in reason
        with pytest.raises(UnavailableError, match="no BF16"):
            _run(cnn_path, Precision.BF16)
        return
    outputs, facts, profile = _run(cnn_path, Precision.BF16)
    assert facts["execution_precision"] == "bf16"
    assert facts["layer_precisions"].get("bf16", 0) > 0
    assert any(layer["exec_type"].endswith("bf16") for layer in profile)
    report = compare_outputs(_reference(cnn_path), outputs, ["logits"])
    assert report.cosine_similarity > 0.999
    assert 0 < report.max_abs_error < 0.5  # bf16 rounds: not bit-equal, but close


def test_fp16_compresses_weights_and_computes_in_f32(cnn_path: Path) -> None:
    outputs, facts, _ = _run(cnn_path, Precision.FP16)
    assert facts["execution_precision"] == "f32"
    assert facts["weight_types"].get("f16", 0) > 0 and "f32" not in facts["weight_types"]
    report = compare_outputs(_reference(cnn_path), outputs, ["logits"])
    assert report.cosine_similarity > 0.9999


def test_int8_through_nncf_runs_int8_kernels_within_bounds(cnn_path: Path, tmp_path: Path) -> None:
    config = Configuration(precision=Precision.INT8_STATIC, backend="openvino")
    variant = build_variant(cnn_path, config, tmp_path, calibration=FEEDS)
    assert any("NNCF" in step and "4 calibration samples" in step for step in variant.steps)
    outputs, facts, profile = _run(variant.path, Precision.INT8_STATIC)
    assert facts["execution_precision"] == "f32"  # layers NNCF left in float stay f32, not bf16
    assert facts["layer_precisions"].get("i8", 0) + facts["layer_precisions"].get("u8", 0) > 0
    conv = [layer for layer in profile if layer["type"] == "Convolution"]
    assert conv and all(kernel_precision(layer["exec_type"]) == "i8" for layer in conv)
    report = compare_outputs(_reference(cnn_path), outputs, ["logits"])
    assert report.cosine_similarity > 0.99


def test_knobs_are_read_back_from_the_compiled_model(mlp_path: Path) -> None:
    asked = OpenVinoOptions(performance_hint=PerformanceHint.THROUGHPUT, streams=2)
    with get_runtime("openvino").open(
        mlp_path, SessionOptions(Configuration(Precision.FP32, backend="openvino", openvino=asked))
    ) as runner:
        assert runner.facts["performance_hint"] == "throughput" and runner.facts["streams"] == 2
    threads = Configuration(Precision.FP32, backend="openvino", intra_op_threads=1)
    options = SessionOptions(threads)
    with get_runtime("openvino").open(mlp_path, options) as runner:
        assert runner.facts["threads"] == 1 and runner.facts["performance_hint"] == "latency"
        assert runner.input_specs() == [{"name": "x", "dtype": "float32", "shape": ["?", 16]}]
        (probs,) = runner.infer({"x": np.ones((3, 16), np.float32)})
    assert probs.shape == (3, 10) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)


def test_precisions_a_runtime_lacks_are_unavailable_with_a_reason() -> None:
    openvino, onnxruntime = get_runtime("openvino"), get_runtime("onnxruntime")
    assert "INT8 static" in openvino.precision_unavailable(Precision.INT8_DYNAMIC, "cpu")
    assert "OpenVINO" in onnxruntime.precision_unavailable(Precision.BF16, "cpu")
    assert onnxruntime.precision_unavailable(Precision.FP32, "cpu") is None
    missing = [s for s in openvino.providers() if not s.available]
    assert all(s.reason for s in missing)


@pytest.mark.parametrize("precision", [Precision.FP32, Precision.BF16, Precision.INT8_DYNAMIC])
def test_a_configuration_runs_end_to_end_and_records_what_ran(
    cnn_path: Path, tmp_path: Path, precision: Precision
) -> None:
    config = Configuration(
        precision=precision,
        backend="openvino",
        openvino=OpenVinoOptions(performance_hint=PerformanceHint.LATENCY),
    )
    task = ConfigurationTask(
        source_path=str(cnn_path),
        configuration=config,
        measure=MEASURE_PRESETS["quick"],
        output_dir=str(tmp_path / "out"),
    )
    result = run_configuration(task)
    expected_reason = get_runtime("openvino").precision_unavailable(precision, "cpu")
    if expected_reason:
        assert (result.status, result.error) == ("unavailable", expected_reason)
        return
    assert result.status == "ok", result.error
    assert result.runtime_facts["execution_precision"] == {"fp32": "f32", "bf16": "bf16"}[precision]
    assert result.providers_used == ["OpenVINO CPU"]
    assert result.layer_profile and result.accuracy is not None
    assert result.accuracy.cosine_similarity > 0.999
    assert result.environment["backend"] == "openvino"
    assert "ort_optimized_path" not in result.environment  # ORT's graph is not what OpenVINO ran


def test_ort_openvino_plugin_is_usable_only_where_discovery_gives_it_a_device(
    mlp_path: Path,
) -> None:
    pytest.importorskip("onnxruntime_ep_openvino")
    import onnxruntime as ort

    backend = get_runtime("onnxruntime")
    status = backend.provider_status("openvino")
    assert status is not None and status.native_name == "OpenVINOExecutionProvider"
    offered = [d for d in ort.get_ep_devices() if d.ep_name == "OpenVINOExecutionProvider"]
    assert status.available == bool(offered)
    if not status.available:  # e.g. this AMD host: the plugin loads but accepts no device
        assert "device discovery found" in status.reason and "accepted none" in status.reason
        with pytest.raises(UnavailableError, match="accepted none"):
            backend.open(
                mlp_path, SessionOptions(Configuration(Precision.FP32, provider="openvino"))
            )
        return
    with backend.open(
        mlp_path, SessionOptions(Configuration(Precision.FP32, provider="openvino"))
    ) as runner:
        assert "OpenVINOExecutionProvider" in runner.providers_used


def test_precision_gaps_list_what_this_machine_cannot_run_and_why() -> None:
    from backend.runtimes import precision_gaps

    picked = [Precision.FP32, Precision.BF16, Precision.INT8_DYNAMIC]
    gaps = precision_gaps(["onnxruntime", "openvino"], ["cpu", "cuda"], picked)
    found = {(g.runtime, g.provider, g.precision) for g in gaps}
    assert ("onnxruntime", "cpu", Precision.BF16) in found
    assert ("openvino", "cpu", Precision.INT8_DYNAMIC) in found
    assert all(g.precision != Precision.FP32 for g in gaps)
    assert (("openvino", "cpu", Precision.BF16) in found) == (_bf16_reason() is not None)
    assert all(g.reason for g in gaps)
