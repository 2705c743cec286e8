"""ONNX Runtime on NVIDIA GPUs: CUDA and TensorRT provider options, device-resident timing
(IOBinding), out-of-memory recognition, and the banners ORT prints when a provider fails.

Kept apart from onnxruntime.py (the 400-line limit) and reached only from it.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from backend.cudaoptions import CudaOptions
from backend.errors import UnavailableError

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


def declared_output_shapes(
    session: Any, feeds: dict[str, np.ndarray]
) -> list[tuple[int, ...]] | None:
    """Each output's shape from the session's metadata, its named dimensions bound by the feeds'
    shapes (an output dim named "batch" takes the size of an input's "batch"); None when one stays
    unknown (a dimension the graph computes), so the shapes are learned from a run instead."""
    bound: dict[str, int] = {}
    for spec in session.get_inputs():
        if spec.name in feeds:
            for dim, size in zip(spec.shape, np.shape(feeds[spec.name]), strict=False):
                if isinstance(dim, str):
                    bound.setdefault(dim, int(size))
    shapes = []
    for spec in session.get_outputs():
        shape = []
        for dim in spec.shape:
            if isinstance(dim, int) and dim >= 0:
                shape.append(dim)
            elif isinstance(dim, str) and dim in bound:
                shape.append(bound[dim])
            else:
                return None
        shapes.append(tuple(shape))
    return shapes


def learn_output_shapes(
    session: Any, feeds: dict[str, np.ndarray], device: str = "cuda", device_id: int = 0
) -> list[tuple[int, ...]]:
    """One run with outputs ORT allocates, for their shapes. Never on a session that captures a
    CUDA graph: its first run is the capture, and the graph would keep these outputs' addresses."""
    binding = session.io_binding()
    for name, array in feeds.items():
        binding.bind_cpu_input(name, np.ascontiguousarray(array))
    for spec in session.get_outputs():
        binding.bind_output(spec.name, device, device_id)
    session.run_with_iobinding(binding)
    return [tuple(value.shape()) for value in binding.get_outputs()]


def output_shapes(
    session: Any,
    feeds: dict[str, np.ndarray],
    graph: bool,
    open_plain: Callable[[], Any],
    device: str = "cuda",
) -> list[tuple[int, ...]]:
    """What the device buffers must hold, learned without a run on a session that captures a
    CUDA graph (its first run is the capture): the declared shapes, else one run on a second
    session of the same model with graphs off (open_plain). Without graphs, a run of its own."""
    if not graph:
        return learn_output_shapes(session, feeds, device)
    shapes = declared_output_shapes(session, feeds)
    if shapes is not None:
        return shapes
    probe = open_plain()
    try:
        return learn_output_shapes(probe, feeds, device)
    finally:
        del probe


class DeviceBinding:
    """Inputs and outputs in fixed buffers on the device, bound before the first run: each run()
    is the model alone, and a CUDA graph (captured on the first run, replayed after it at the
    same addresses) writes into the very buffers outputs() reads.

    output_shapes must be known beforehand (declared_output_shapes, or learn_output_shapes on a
    session that captures no graph): running once on another binding to learn them is what left
    the bound outputs all zeros under graph replay on an H200. device is "cuda", or "cpu" where
    ORT's CPU IOBinding stands in (tests).
    """

    def __init__(
        self,
        session: Any,
        feeds: dict[str, np.ndarray],
        output_shapes: list[tuple[int, ...]],
        device: str = "cuda",
        device_id: int = 0,
    ) -> None:
        import onnxruntime as ort

        self.session = session
        self._inputs = {  # own copies: on the CPU an OrtValue wraps the array it is given, and
            # update_inplace would overwrite the caller's feed
            name: ort.OrtValue.ortvalue_from_numpy(np.array(array, copy=True), device, device_id)
            for name, array in feeds.items()
        }
        specs = session.get_outputs()
        if len(specs) != len(output_shapes):
            raise ValueError(f"{len(output_shapes)} output shapes for {len(specs)} outputs")
        self._outputs = [
            ort.OrtValue.ortvalue_from_shape_and_type(
                list(shape), _numpy_type(spec.name, spec.type), device, device_id
            )
            for spec, shape in zip(specs, output_shapes, strict=True)
        ]
        self.binding = session.io_binding()
        for name, value in self._inputs.items():
            self.binding.bind_ortvalue_input(name, value)
        for spec, value in zip(specs, self._outputs, strict=True):
            self.binding.bind_ortvalue_output(spec.name, value)

    def run(self) -> None:
        """One inference on device-resident data; returns once the device has finished it."""
        self.session.run_with_iobinding(self.binding)
        self.binding.synchronize_outputs()

    def outputs(self) -> list[np.ndarray]:
        """The bound outputs copied to the host (for the accuracy check, never timed); a copy
        also on the CPU, where numpy() is a view the next run overwrites."""
        return [np.array(value.numpy(), copy=True) for value in self._outputs]

    def infer(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run on new inputs written into the bound input buffers (a CUDA graph replays the
        captured addresses, so a plain session.run would not see new inputs)."""
        for name, array in feeds.items():
            self._inputs[name].update_inplace(np.ascontiguousarray(array))
        self.run()
        return self.outputs()


def _numpy_type(name: str, ort_type: str) -> Any:
    if ort_type not in ORT_TYPE_TO_NUMPY:
        raise UnavailableError(
            f"Output {name!r} is {ort_type}, which device-resident timing cannot bind; "
            "time this model end to end."
        )
    return ORT_TYPE_TO_NUMPY[ort_type]


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
