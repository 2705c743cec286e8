"""ONNX Runtime on NVIDIA GPUs: CUDA and TensorRT provider options, device-resident timing
(IOBinding), out-of-memory recognition, and the banners ORT prints when a provider fails.

Kept apart from onnxruntime.py (the 400-line limit) and reached only from it.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from backend.cudaoptions import CudaOptions

ORT_TYPE_TO_NUMPY = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(bool)": np.bool_,
}


def cuda_provider_options(cuda: CudaOptions) -> dict[str, str]:
    """The CUDAExecutionProvider options, under the names onnxruntime-gpu 1.31 reads.

    Names checked against the strings in libonnxruntime_providers_cuda.so of 1.31.1 and ORT's
    CUDA provider page (onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html).
    """
    return {
        "cudnn_conv_algo_search": cuda.conv_algo_search.value,
        "use_tf32": "1" if cuda.use_tf32 else "0",
        "prefer_nhwc": "1" if cuda.prefer_nhwc else "0",
        "enable_cuda_graph": "1" if cuda.enable_cuda_graph else "0",
        "cudnn_conv_use_max_workspace": "1" if cuda.conv_max_workspace else "0",
        "fuse_conv_bias": "1" if cuda.fuse_conv_bias else "0",
    }


class DeviceBinding:
    """Inputs copied to the GPU once, outputs preallocated there: each run() is the model alone.

    The first run lets ORT allocate the outputs to learn their shapes; later runs write into
    fixed device buffers, which is also what CUDA graphs need (the same addresses every replay).
    """

    def __init__(self, session: Any, feeds: dict[str, np.ndarray], device_id: int = 0) -> None:
        import onnxruntime as ort

        self.session = session
        self._inputs = {
            name: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), "cuda", device_id)
            for name, array in feeds.items()
        }
        names = [o.name for o in session.get_outputs()]
        first = self._binding()
        for name in names:
            first.bind_output(name, "cuda", device_id)
        session.run_with_iobinding(first)
        self._outputs = [
            ort.OrtValue.ortvalue_from_shape_and_type(
                value.shape(), ORT_TYPE_TO_NUMPY[value.data_type()], "cuda", device_id
            )
            for value in first.get_outputs()
        ]
        self.binding = self._binding()
        for name, value in zip(names, self._outputs, strict=True):
            self.binding.bind_ortvalue_output(name, value)

    def _binding(self) -> Any:
        binding = self.session.io_binding()
        for name, value in self._inputs.items():
            binding.bind_ortvalue_input(name, value)
        return binding

    def run(self) -> None:
        """One inference on device-resident data; returns once the GPU has finished it."""
        self.session.run_with_iobinding(self.binding)
        self.binding.synchronize_outputs()

    def outputs(self) -> list[np.ndarray]:
        """The last run's outputs copied to the host (for the accuracy check, never timed)."""
        return [value.numpy() for value in self._outputs]

    def infer(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run on new inputs written into the same device buffers (a CUDA graph replays the
        captured addresses, so a plain session.run would not see new inputs)."""
        for name, array in feeds.items():
            self._inputs[name].update_inplace(np.ascontiguousarray(array))
        self.run()
        return self.outputs()


@contextmanager
def quiet_native_output() -> Iterator[list[str]]:
    """Capture fds 1 and 2 for the block: ORT's C++ logger writes to 2, its Python fallback
    prints its 'EP Error' banner to 1, and neither belongs in our CLI output or logs."""
    lines: list[str] = []
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile(mode="w+b") as sink:
        for fd in saved:
            os.dup2(sink.fileno(), fd)
        try:
            yield lines
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            lines.extend(sink.read().decode(errors="replace").splitlines())


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def summarise_banner(lines: list[str]) -> str:
    """One line from what ORT printed: the 'EP Error' text, else the first error-like line."""
    clean = [_ANSI.sub("", line).strip() for line in lines if line.strip()]
    for line in clean:
        match = re.match(r"EP Error:? (.+?)(?: when using \[.*\])?$", line)
        if match:
            return _last_clause(match.group(1))
    for line in clean:
        if re.search(r"error|fail|cannot|not in available|unable", line, re.IGNORECASE):
            return _last_clause(line)
    return clean[0] if clean else ""


def _last_clause(text: str) -> str:
    """The words after ORT's prefixes: '[ONNXRuntimeError] : 1 : FAIL : ', 'file.cc:123 func()'
    and 'Failed to load library X with error: ' (the loader's own reason is what matters)."""
    if "with error:" in text:
        text = text.rsplit("with error:", 1)[1]
    text = re.sub(r"^.*\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text.strip())
    while match := re.match(r"^\S+\.(?:cc|h|cpp|cu):\d+ (?:[^ (]+\([^)]*\)(?: const)? )?", text):
        text = text[match.end() :]
    return text.strip()[:300]
