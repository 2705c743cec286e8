"""CUDA/TensorRT provider option building, device-resident refusal and ORT banner capture (CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backend.cudaoptions import CudaOptions
from backend.errors import UnavailableError
from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions, is_out_of_memory
from backend.runtimes.onnxruntime import probe_provider
from backend.runtimes.ort_cuda import (
    cuda_provider_options,
    summarise_banner,
)
from backend.specs import Configuration, Precision

ROOT = Path(__file__).resolve().parents[3]


def test_cuda_options_use_the_provider_option_names_of_onnxruntime_gpu() -> None:
    assert cuda_provider_options(CudaOptions()) == {
        "cudnn_conv_algo_search": "EXHAUSTIVE",
        "use_tf32": "1",
        "prefer_nhwc": "0",
        "enable_cuda_graph": "0",
        "cudnn_conv_use_max_workspace": "1",
        "fuse_conv_bias": "0",
    }
    tuned = CudaOptions(
        conv_algo_search="HEURISTIC",
        use_tf32=False,
        enable_cuda_graph=True,
        conv_max_workspace=False,
        fuse_conv_bias=True,
    )
    assert cuda_provider_options(tuned) | {"prefer_nhwc": "1"} == {
        "cudnn_conv_algo_search": "HEURISTIC",
        "use_tf32": "0",
        "prefer_nhwc": "1",
        "enable_cuda_graph": "1",
        "cudnn_conv_use_max_workspace": "0",
        "fuse_conv_bias": "1",
    }


def test_device_resident_timing_is_refused_on_the_cpu_provider(mlp_path: Path) -> None:
    import numpy as np

    runner = get_runtime("onnxruntime").open(
        mlp_path, SessionOptions(Configuration(Precision.FP32))
    )
    with runner, pytest.raises(UnavailableError, match="GPU provider"):
        runner.bind_on_device({"x": np.zeros((1, 16), np.float32)})


PROBE = """
import json, sys
sys.path.insert(0, {root!r})
import onnxruntime as ort
from backend.runtimes.onnxruntime import _probe_model_bytes
from backend.runtimes.ort_cuda import quiet_native_output, summarise_banner
with quiet_native_output() as lines:
    options = ort.SessionOptions()
    options.log_severity_level = 0  # ORT's C++ logger writes its verbose lines to fd 2
    ort.InferenceSession(_probe_model_bytes(), options, providers=["CUDAExecutionProvider"])
print(json.dumps({{"lines": len(lines), "summary": summarise_banner(lines)}}))
"""


def test_what_ort_prints_for_a_provider_it_cannot_use_is_captured_and_summarised() -> None:
    """A fresh interpreter (no pytest capture): a CPU build asked for CUDA warns and logs."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(root=str(ROOT))],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stderr == ""
    report = json.loads(done.stdout)  # the only thing on stdout is our own line
    assert report["lines"] > 0
    assert "CUDAExecutionProvider" in report["summary"]


def test_the_tensorrt_probe_prints_nothing_and_says_why(capfd: pytest.CaptureFixture) -> None:
    status = probe_provider("tensorrt")
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert not status.available and "TensorrtExecutionProvider" in status.reason


def test_ep_error_banner_becomes_the_loader_reason_on_one_line() -> None:
    banner = [
        "*************** EP Error ***************",
        "EP Error /onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:1539 "
        "onnxruntime::Provider& onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : "
        "FAIL : Failed to load library libonnxruntime_providers_tensorrt.so with error: "
        "libnvinfer.so.10: cannot open shared object file: No such file or directory "
        "when using ['TensorrtExecutionProvider', 'CUDAExecutionProvider']",
        "Falling back to ['CUDAExecutionProvider', 'CPUExecutionProvider'] and retrying.",
        "****************************************",
    ]
    assert summarise_banner(banner) == (
        "libnvinfer.so.10: cannot open shared object file: No such file or directory"
    )
    positioned = ["EP Error provider_bridge_ort.cc:1862 Get() TensorRT EP found no device"]
    assert summarise_banner(positioned) == "TensorRT EP found no device"


def test_a_full_gpu_is_recognised_from_the_runtime_words() -> None:
    full = RuntimeError(
        "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running "
        "Conv node. Failed to allocate memory for requested buffer of size 1073741824"
    )
    assert is_out_of_memory(full)
    assert not is_out_of_memory(RuntimeError("Invalid input name: x"))


def test_the_tensorrt_rtx_plugin_is_reported_with_its_reason(capfd: pytest.CaptureFixture) -> None:
    from backend.runtimes.ort_plugins import probe_plugin

    status = probe_plugin("tensorrt_rtx")
    assert capfd.readouterr() == ("", "")
    assert status.native_name == "NvTensorRTRTXExecutionProvider" and not status.available
    assert "onnxruntime-ep-nv-tensorrt-rtx" in status.reason
