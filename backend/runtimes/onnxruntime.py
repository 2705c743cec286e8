"""ONNX Runtime (the default runtime): CPU, CUDA and TensorRT providers, each detected for real."""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

import settings
from backend.errors import UnavailableError
from backend.runtimes import ort_cuda, ort_int8, ort_trt
from backend.runtimes.base import DeviceRun, ProviderStatus, Runner, Runtime, SessionOptions
from backend.runtimes.ort_plugins import PLUGIN_PROVIDERS, plugin_devices, probe_plugin
from backend.specs import Precision

log = logging.getLogger(__name__)

NATIVE_PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}

ORT_TYPE_TO_NUMPY = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(int16)": "int16",
    "tensor(uint16)": "uint16",
    "tensor(int32)": "int32",
    "tensor(uint32)": "uint32",
    "tensor(int64)": "int64",
    "tensor(uint64)": "uint64",
    "tensor(bool)": "bool",
    "tensor(string)": "str",
}


def graph_level(name: str) -> Any:
    import onnxruntime as ort

    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    return levels[name]


def _probe_model_bytes() -> bytes:
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def _loader_reason(lines: list[str]) -> str:
    """The first 'cannot open shared object' style line, which names the missing library."""
    for line in lines:
        match = re.search(r"with error: (.+?)$", line) or re.search(r"(lib\S+\.so\S*: .+)$", line)
        if match:
            return match.group(1).strip()
    return ""


@lru_cache(maxsize=8)
def probe_provider(short: str) -> ProviderStatus:
    """Open a tiny session on one provider and read get_providers(): ORT's own list lies.

    onnxruntime-gpu on a host without CUDA lists CUDA and TensorRT as available and then falls
    back to CPU with only a log line; a real session is the only honest test.
    """
    import onnxruntime as ort

    native = NATIVE_PROVIDERS[short]
    listed = set(ort.get_available_providers())
    build = "GPU build (onnxruntime-gpu)" if "CUDAExecutionProvider" in listed else "CPU build"
    if native not in listed:
        return ProviderStatus(
            short,
            False,
            f"onnxruntime {ort.__version__} is the {build} and has no {native}; "
            "install requirements-gpu.txt on a CUDA host",
            native,
        )
    if short != "cpu":
        preload_cuda_libraries(ort)
    # fds 1 and 2 both: ORT's C++ log goes to 2 and its Python fallback prints an "EP Error"
    # banner to 1 when, say, TensorRT's libraries are missing; the reason is summarised instead
    with ort_cuda.quiet_native_output() as logged:
        try:
            options = ort.SessionOptions()
            options.log_severity_level = 3
            session = ort.InferenceSession(_probe_model_bytes(), options, providers=[native])
            got, error = session.get_providers(), None
        except Exception as exc:  # the runtime's own reason is the most useful message
            got, error = [], exc
    if error is not None:
        detail = ort_cuda.summarise_banner(str(error).splitlines()) or type(error).__name__
        return ProviderStatus(short, False, f"{native} failed to start: {detail}", native)
    if native in got:
        return ProviderStatus(short, True, _device_detail(short), native)
    reason = (
        _loader_reason(logged)
        or ort_cuda.summarise_banner(logged)
        or "its CUDA/cuDNN/TensorRT libraries could not be loaded on this machine"
    )
    return ProviderStatus(
        short,
        False,
        f"{native} is listed but a real session fell back to {', '.join(got)}: {reason}",
        native,
    )


def detect_providers() -> tuple[ProviderStatus, ...]:
    return tuple(probe_provider(short) for short in NATIVE_PROVIDERS)


def preload_cuda_libraries(ort: Any) -> None:
    """Load CUDA/cuDNN from pip's nvidia-* packages (as torch installs them) when present."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return
    try:
        preload()
    except Exception as exc:  # the session probe below reports what is really missing
        log.info("onnxruntime.preload_dlls failed: %s", exc)


def _device_detail(short: str) -> str:
    if short == "cpu":
        from backend.host import describe_environment

        return describe_environment()["cpu"]
    from backend.hardware import gpu_name

    return gpu_name(0) or "GPU"


class OnnxRuntimeRunner(Runner):
    def activate_impl(self) -> None:
        import onnxruntime as ort

        config = self.options.configuration
        if config.provider in PLUGIN_PROVIDERS:
            native = PLUGIN_PROVIDERS[config.provider][1]
        else:
            native = NATIVE_PROVIDERS[config.provider]
        session_options = ort.SessionOptions()
        session_options.graph_optimization_level = graph_level(config.optimization_level)
        session_options.log_severity_level = 3
        if config.intra_op_threads:
            session_options.intra_op_num_threads = config.intra_op_threads
        session_options.enable_mem_pattern = config.onnxruntime.enable_mem_pattern
        session_options.enable_cpu_mem_arena = config.onnxruntime.enable_cpu_mem_arena
        int8 = ort_int8.configure(session_options, config)
        self.facts["int8_matmul"] = int8.ran
        if int8.note and config.precision.is_int8:
            self.notes.append(int8.note)
        if self.options.optimized_model_path is not None:
            session_options.optimized_model_filepath = str(self.options.optimized_model_path)
        if self.options.profile_prefix is not None:
            session_options.enable_profiling = True
            session_options.profile_file_prefix = str(self.options.profile_prefix)
        self._native, self._session_options = native, session_options
        self.session = self._open(self._provider_options())
        got = self.session.get_providers()
        self.providers_used = got
        if native not in got:
            raise UnavailableError(
                f"ONNX Runtime did not give this session {native} (it got {', '.join(got)}); "
                "refusing to report CPU numbers as GPU numbers"
            )
        self._inputs = self.session.get_inputs()
        self._outputs = [o.name for o in self.session.get_outputs()]

    def _open(self, provider_options: dict[str, str]) -> Any:
        import onnxruntime as ort

        native, session_options = self._native, self._session_options
        providers: list[Any] | None = [(native, provider_options)] if provider_options else [native]
        # plugins are bound to discovered devices
        if self.options.configuration.provider in PLUGIN_PROVIDERS:
            devices = plugin_devices(ort, native)
            session_options.add_provider_for_devices(devices, provider_options)
            providers = None
        elif native != "CPUExecutionProvider":
            providers.append("CPUExecutionProvider")  # for nodes the device cannot take
        return ort.InferenceSession(str(self.model_path), session_options, providers=providers)

    def _provider_options(self) -> dict[str, str]:
        """The typed CUDA or TensorRT options the configuration carries, in ORT's words."""
        config = self.options.configuration
        options: dict[str, str] = {}
        if config.provider == "cuda":
            options.update(ort_cuda.cuda_provider_options(config.cuda))
        if config.provider == "tensorrt":
            trt = config.tensorrt
            ort_trt.prepare_cache_folders(trt, settings.data_dir())
            options.update(ort_trt.tensorrt_provider_options(trt, settings.data_dir()))
        return options

    def deactivate_impl(self) -> None:
        self.session = None

    def bind_on_device(self, feeds: dict[str, np.ndarray]) -> DeviceRun:
        provider = self.options.configuration.provider
        if provider not in ("cuda", "tensorrt"):
            raise UnavailableError(f"device-resident timing needs a GPU provider, not {provider!r}")
        options = self._provider_options()
        plain = options | {"enable_cuda_graph": "0", "cudnn_conv_algo_search": "HEURISTIC"}
        shapes = ort_cuda.output_shapes(
            self.session, feeds, options.get("enable_cuda_graph") == "1", lambda: self._open(plain)
        )
        return ort_cuda.DeviceBinding(self.session, feeds, shapes)

    def input_specs(self) -> list[dict[str, Any]]:
        return [
            {
                "name": i.name,
                "dtype": ORT_TYPE_TO_NUMPY.get(i.type, i.type),
                "shape": [d if d is not None else "?" for d in i.shape],
            }
            for i in self._inputs
        ]

    def output_names(self) -> list[str]:
        return list(self._outputs)

    def infer(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(self._outputs, feeds)

    def end_profiling(self) -> Path:
        if self.options.profile_prefix is None:
            raise UnavailableError("this session was opened without profile_prefix")
        return Path(self.session.end_profiling())


class OnnxRuntime(Runtime):
    name = "onnxruntime"

    def version(self) -> str:
        import onnxruntime as ort

        return ort.__version__

    def providers(self) -> list[ProviderStatus]:
        return [*detect_providers(), *(probe_plugin(short) for short in PLUGIN_PROVIDERS)]

    def provider_status(self, provider: str) -> ProviderStatus | None:
        if provider in PLUGIN_PROVIDERS:
            return probe_plugin(provider)
        return probe_provider(provider) if provider in NATIVE_PROVIDERS else None

    def precision_unavailable(self, precision: Precision, provider: str) -> str | None:
        if precision == Precision.BF16:
            return (
                "Optiboard runs BF16 only through OpenVINO (ONNX Runtime's CPU provider has no "
                "bfloat16 kernels for most ops); pick the openvino runtime for BF16"
            )
        return None

    def open(self, model_path: Path, options: SessionOptions) -> Runner:
        self.require(options.configuration.provider)
        return OnnxRuntimeRunner(model_path, options)


# ---- sessions the compatibility matrix needs (reached through backend.runtimes) ----------------
