"""ONNX Runtime's kernel registry, read in a child process and cached on disk per version."""

from __future__ import annotations

import onnxruntime

from backend.compat.registry import Kernel, load_registry


def test_registry_is_read_in_a_child_and_cached_per_runtime_version(data_dir):
    registry = load_registry()
    assert registry.error is None
    assert len(registry.kernels) > 1000
    assert "CPUExecutionProvider" in registry.providers
    # named after the installed build (onnxruntime or onnxruntime-gpu) and its exact version
    version = onnxruntime.__version__
    cached = list((data_dir / "cache").glob(f"ort-kernels-onnxruntime*-{version}.json"))
    assert len(cached) == 1
    assert registry.runtime.endswith(f" {version}")
    abs_float = [
        k
        for k in registry.lookup("CPUExecutionProvider", "", "Abs")
        if "tensor(float)" in k.types.get("T", [])
    ]
    assert {k.range_label for k in abs_float} == {"6-12", "13+"}
    assert load_registry().kernels == registry.kernels  # from the cache file


def test_open_ended_kernel_serves_only_its_own_since_version():
    open_ended = Kernel("DequantizeLinear", "", 25, None, "CPUExecutionProvider", {})
    closed = Kernel("Abs", "", 6, 12, "CPUExecutionProvider", {})
    assert open_ended.covers(25) and not open_ended.covers(28)
    assert closed.covers(6) and closed.covers(12) and not closed.covers(13)
