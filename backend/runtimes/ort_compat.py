"""ONNX Runtime sessions for the compatibility tools, not for measuring: the installed kernel
registry, a node's real placement (ORT's verbose log) and one run of a node test. Each runs in a
child (backend/compat): the registry call segfaults where CUDA fails to load, and the placement
opens the uploaded model (in the sandbox).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backend.runtimes import ort_cuda
from backend.runtimes.onnxruntime import preload_cuda_libraries


def kernel_definitions() -> list[dict[str, Any]]:
    """Every kernel the installed ONNX Runtime registers: op, domain, version range, types.

    Call it in a child process only: get_all_opkernel_def() segfaults in onnxruntime-gpu on a
    host whose CUDA provider fails to load.
    """
    import onnxruntime as ort
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    if "CUDAExecutionProvider" in ort.get_available_providers():
        # seen on an H200 with CUDA from pip's nvidia-* packages: without the preload the CUDA
        # provider fails to load and get_all_opkernel_def() segfaults, as on a host without CUDA
        preload_cuda_libraries(ort)
    return [
        {
            "op": k.op_name,
            "domain": k.domain,
            "since": k.version_range[0],
            "until": k.version_range[1],
            "provider": k.provider,
            "types": {name: list(types) for name, types in k.type_constraints.items()},
        }
        for k in state.get_all_opkernel_def()
    ]


def placement_session(model: str | bytes, native: str, weights_folder: str = "") -> dict[str, Any]:
    """A verbose session on `native` on a path, or on a serialized graph whose external data lies
    in `weights_folder`: its placement log (ORT's C++ logger writes to fd 2, captured here).
    Graph optimizations are off so the nodes placed are the model's own."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 0
    options.log_verbosity_level = 0
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if weights_folder:
        options.add_session_config_entry(  # ORT 1.18+: external data of a graph from bytes
            "session.model_external_initializers_file_folder_path", weights_folder
        )
    providers = [native]
    if native != "CPUExecutionProvider":
        providers.append("CPUExecutionProvider")  # the fallback for nodes the device cannot take
        preload_cuda_libraries(ort)  # pip's CUDA libraries: without them, CPU only, silently
    with ort_cuda.quiet_native_output() as logged:
        try:
            session = ort.InferenceSession(model, options, providers=providers)
            got, error = session.get_providers(), None
        except Exception as exc:  # the runtime's message is the result here
            text = str(exc).strip()
            got, error = [], text.splitlines()[0] if text else repr(exc)
    return {"providers": got, "error": error, "log": "\n".join(logged)}


_ML_DTYPES = {
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "int4",
    "uint4",
    "float4_e2m1fn",
    "int2",
    "uint2",
}


def _feed(value: Any) -> Any:
    """An input as ORT takes it: TensorProtos and numpy scalars become arrays, and dtypes numpy
    has no native code for (bfloat16, float8, int4 from ml_dtypes) become OrtValues."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    if isinstance(value, onnx.TensorProto):
        value = numpy_helper.to_array(value)
    if isinstance(value, list):
        return [_feed(v) for v in value]
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if isinstance(value, np.ndarray) and (
        value.dtype.kind == "V" or value.dtype.name in _ML_DTYPES
    ):
        onnx_type = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(value, onnx_type)
    return value


def run_on_cpu_once(model_bytes: bytes, inputs: list[Any]) -> str:
    """'' when ORT's CPU provider loads the model and runs it on the inputs, else its error."""
    import onnxruntime as ort

    try:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        feeds = {n: _feed(v) for n, v in zip(names, inputs, strict=False) if v is not None}
        plain = not any(isinstance(v, ort.OrtValue) for v in feeds.values())
        if plain and any(
            isinstance(v, list) or getattr(v, "dtype", None) is not None and v.dtype.kind in "OUS"
            for v in feeds.values()
        ):
            session.run(None, feeds)  # sequences and strings: only run() takes these
        else:
            # OrtValues in and out: outputs such as bfloat16 have no numpy type to convert to
            values = {
                n: v if isinstance(v, ort.OrtValue) else ort.OrtValue.ortvalue_from_numpy(v)
                for n, v in feeds.items()
            }
            session.run_with_ort_values(None, values)
    except Exception as exc:  # the failure is the measurement
        text = str(exc).strip()
        return (text.splitlines()[0] if text else type(exc).__name__)[:300]
    return ""
