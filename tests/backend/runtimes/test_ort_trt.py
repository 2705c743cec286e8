"""The TensorRT-RTX plugin provider, installed (requirements-dev.txt), probed on a machine it cannot
run on: unavailable, in ONNX Runtime's own words, and nothing printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_tensorrt_rtx_provider_is_unavailable_with_onnx_runtimes_own_reason() -> None:
    # a fresh process: the probe is cached per process, and its native output must stay quiet
    probe = (
        "from backend.runtimes.ort_plugins import probe_plugin\n"
        "s = probe_plugin('tensorrt_rtx')\n"
        "import json, sys; sys.stderr.write(json.dumps([s.available, s.native_name, s.reason]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # no 'EP Error' banner, no plugin log lines
    available, native, reason = json.loads(done.stderr)  # all it wrote: nothing else leaked
    assert (available, native) == (False, "NvTensorRTRTXExecutionProvider")
    assert "plugin package is not installed" not in reason  # it is: ORT itself was asked
    # here ORT's loader names the missing driver library; on a GPU it can not use (Hopper),
    # ORT's device discovery is quoted instead
    assert reason.startswith(
        (
            "ONNX Runtime could not load onnxruntime-ep-nv-tensorrt-rtx: ",
            "onnxruntime-ep-nv-tensorrt-rtx loaded, but ONNX Runtime's device discovery found",
        )
    ), reason
    assert "\n" not in reason and "EP Error" not in reason
