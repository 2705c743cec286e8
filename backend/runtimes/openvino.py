"""The OpenVINO runtime: CPU (and GPU/NPU where OpenVINO finds them), precisions read back.

OpenVINO's CPU plugin runs bf16 by default on CPUs with AVX-512 BF16 or AMX, so an "FP32" row that
only asks for FP32 silently measures bf16. Every runner sets INFERENCE_PRECISION_HINT itself and
reads it back from the compiled model; a mismatch refuses to measure rather than mislabel.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from backend.errors import UnavailableError
from backend.runtimes.base import (
    ModelQuery,
    ProviderStatus,
    Runner,
    Runtime,
    SessionOptions,
)
from backend.specs import Precision

DEVICES = {"cpu": "CPU", "gpu": "GPU", "npu": "NPU"}

# the execution precision each Optiboard precision asks OpenVINO for; INT8 keeps the layers NNCF
# left in float at f32 (not bf16), FP16 is weight compression with f32 arithmetic
EXECUTION_PRECISION = {
    Precision.FP32: "f32",
    Precision.FP16: "f32",
    Precision.INT8_STATIC: "f32",
    Precision.BF16: "bf16",
}
# OPTIMIZATION_CAPABILITIES entries each execution precision needs on a device
CAPABILITY = {"f32": "FP32", "bf16": "BF16", "f16": "FP16"}


@lru_cache(maxsize=1)
def _core() -> Any:
    import openvino as ov

    return ov.Core()


@lru_cache(maxsize=8)
def device_capabilities(device: str) -> tuple[str, ...]:
    """OPTIMIZATION_CAPABILITIES of one device, e.g. ('BF16', 'FP32', 'INT8', ...)."""
    return tuple(_core().get_property(device, "OPTIMIZATION_CAPABILITIES"))


def _status(short: str) -> ProviderStatus:
    native = DEVICES[short]
    core = _core()
    found = core.available_devices
    if not any(d == native or d.startswith(f"{native}.") for d in found):
        return ProviderStatus(
            short,
            False,
            f"OpenVINO found no {native} device here (it found: {', '.join(found) or 'none'})",
            native,
        )
    return ProviderStatus(short, True, str(core.get_property(native, "FULL_DEVICE_NAME")), native)


def _compile_config(options: SessionOptions, precision: str) -> dict[str, Any]:
    openvino = options.configuration.openvino
    config: dict[str, Any] = {
        "INFERENCE_PRECISION_HINT": precision,
        "PERFORMANCE_HINT": openvino.performance_hint.value.upper(),
        "PERF_COUNT": options.perf_counters,
    }
    if openvino.streams:
        config["NUM_STREAMS"] = openvino.streams
    if options.configuration.intra_op_threads:
        config["INFERENCE_NUM_THREADS"] = options.configuration.intra_op_threads
    return config


def _compress_weights(model: Any) -> Any:
    """FP16 weight compression as OpenVINO's own save_model does it, read back from the IR."""
    import openvino as ov

    with tempfile.TemporaryDirectory(prefix="optiboard-ov-") as tmp:
        path = Path(tmp) / "model.xml"
        ov.save_model(model, str(path), compress_to_fp16=True)
        return _core().read_model(str(path))


def _weight_types(model: Any) -> dict[str, int]:
    """Element types of the model's constants (the weights), counted."""
    types = Counter(
        op.get_element_type().get_type_name()
        for op in model.get_ops()
        if op.get_type_name() == "Constant" and op.get_output_size() == 1
    )
    return dict(types)


def _runtime_precisions(compiled: Any) -> dict[str, int]:
    """How many layers of the compiled graph run at each precision (rt_info runtimePrecision)."""
    counts: Counter[str] = Counter()
    for op in compiled.get_runtime_model().get_ops():
        info = op.get_rt_info()
        if info["layerType"].astype(str) not in {"Input", "Output", "Const"}:
            counts[info["runtimePrecision"].astype(str)] += 1
    return dict(counts)


def _failed_ops(error: str) -> dict[str, str]:
    """The ops OpenVINO's frontend report names, each with the last line of its message.

    The report lists '-- Col2Im-18 with a message:' blocks, then a summary such as
    '-- No conversion rule found for operations: Bernoulli-15, com.acme.MyOp'.
    """
    found: dict[str, str] = {}
    current = ""
    for raw in error.splitlines():
        line = raw.strip()
        if line.startswith("-- ") and line.endswith("with a message:"):
            current = line[3:].removesuffix("with a message:").strip()
            found[current] = ""
        elif line.startswith("-- ") and ":" in line:
            summary, ops = line[3:].split(":", 1)
            for op in (o.strip() for o in ops.split(",")):
                if op:
                    found.setdefault(op, summary.strip())
            current = ""
        elif current and line and not line.startswith("Summary"):
            found[current] = line  # the last line of the block says what is wrong
    return found


def _first_lines(error: str, limit: int = 4) -> str:
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("Exception from", "Check 'false'"))]
    return " ".join(useful[:limit])[:500]


def _unsupported_per_tensor(model: Any, supported: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """For each named tensor, the op types computing it (back to the previous named tensors)
    that the device does not take. OpenVINO's ONNX frontend names an ONNX node's outputs on the
    last op it translates that node into; the ops before it are unnamed."""
    answer: dict[str, tuple[str, ...]] = {}
    for op in model.get_ordered_ops():
        names = {name for output in op.outputs() for name in output.get_names()}
        if not names:
            continue
        missing: set[str] = set()
        stack, seen = [op], set()
        while stack:
            current = stack.pop()
            if current.get_friendly_name() in seen:
                continue
            seen.add(current.get_friendly_name())
            if current.get_friendly_name() not in supported:
                missing.add(current.get_type_name())
            for value in current.input_values():
                if not value.get_names():  # unnamed: part of the same ONNX node
                    stack.append(value.get_node())
        for name in names:
            answer[name] = tuple(sorted(missing))
    return answer


class OpenVinoRunner(Runner):
    """One compiled model and one infer request; the precision asked is the one read back."""

    def activate_impl(self) -> None:
        precision = self.options.configuration.precision
        asked = EXECUTION_PRECISION[precision]
        device = DEVICES[self.options.configuration.provider]
        core = _core()
        model = core.read_model(str(self.model_path))
        if precision == Precision.FP16:
            model = _compress_weights(model)
        compiled = core.compile_model(model, device, _compile_config(self.options, asked))
        got = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        if got != asked:
            raise UnavailableError(
                f"OpenVINO compiled this model at {got} when {asked} was asked; refusing to "
                f"report {got} numbers as {precision.label}"
            )
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        self.providers_used = [f"OpenVINO {d}" for d in compiled.get_property("EXECUTION_DEVICES")]
        self.facts = {
            "execution_precision": got,
            "execution_devices": list(compiled.get_property("EXECUTION_DEVICES")),
            "streams": int(compiled.get_property("NUM_STREAMS")),
            "threads": int(compiled.get_property("INFERENCE_NUM_THREADS")),
            "performance_hint": str(compiled.get_property("PERFORMANCE_HINT")).lower(),
            "layer_precisions": _runtime_precisions(compiled),
            "weight_types": _weight_types(model),
        }
        self._inputs = list(compiled.inputs)
        self._outputs = list(compiled.outputs)

    def deactivate_impl(self) -> None:
        self.request = None
        self.compiled = None

    def input_specs(self) -> list[dict[str, Any]]:
        return [
            {
                "name": port.get_any_name(),
                "dtype": np.dtype(port.get_element_type().to_dtype()).name,
                "shape": [d.get_length() if d.is_static else "?" for d in port.get_partial_shape()],
            }
            for port in self._inputs
        ]

    def output_names(self) -> list[str]:
        return [port.get_any_name() for port in self._outputs]

    def infer(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.request.infer(feeds, share_inputs=True)  # outputs are copied below
        return [self.request.get_output_tensor(i).data.copy() for i in range(len(self._outputs))]

    def execution_graph(self) -> list[dict[str, Any]]:
        """The compiled graph as the plugin runs it: each layer's type, runtime precision, the
        original ops fused into it (originalLayersNames) and the layers feeding it."""
        layers = []
        for op in self.compiled.get_runtime_model().get_ordered_ops():
            info = op.get_rt_info()
            original = info["originalLayersNames"].astype(str)
            layers.append(
                {
                    "name": op.get_friendly_name(),
                    "type": info["layerType"].astype(str),
                    "precision": info["runtimePrecision"].astype(str),
                    "original": [name for name in original.split(",") if name],
                    "inputs": [value.get_node().get_friendly_name() for value in op.input_values()],
                }
            )
        return layers

    def layer_profile(self) -> list[dict[str, Any]]:
        """OpenVINO's PERF_COUNT counters of the last inference, executed layers only."""
        from openvino import ProfilingInfo

        return [
            {
                "node": info.node_name,
                "type": info.node_type,
                "exec_type": info.exec_type,
                "real_time_us": info.real_time.total_seconds() * 1e6,
                "cpu_time_us": info.cpu_time.total_seconds() * 1e6,
            }
            for info in self.request.get_profiling_info()
            if info.status == ProfilingInfo.Status.EXECUTED
        ]


class OpenVinoRuntime(Runtime):
    name = "openvino"

    def version(self) -> str:
        import openvino as ov

        return ov.get_version().split("-")[0]

    def providers(self) -> list[ProviderStatus]:
        return [_status(short) for short in DEVICES]

    def provider_status(self, provider: str) -> ProviderStatus | None:
        return _status(provider) if provider in DEVICES else None

    def precision_unavailable(self, precision: Precision, provider: str) -> str | None:
        if precision not in EXECUTION_PRECISION:
            return (
                f"OpenVINO has no {precision.label} mode; pick INT8 static, which OpenVINO "
                "quantizes with NNCF"
            )
        status = self.provider_status(provider)
        if status is None or not status.available:
            return None  # require() reports the device itself
        needed = CAPABILITY[EXECUTION_PRECISION[precision]]
        capabilities = device_capabilities(DEVICES[provider])
        if needed not in capabilities:
            return (
                f"OpenVINO's {DEVICES[provider]} device has no {needed} support on this machine "
                f"(its capabilities: {', '.join(capabilities)})"
            )
        return None

    def query_model(self, model_path: Path, provider: str) -> ModelQuery | None:
        """query_model per op, then a real compile_model; failures keep OpenVINO's own words."""
        device = DEVICES.get(provider, provider.upper())
        runtime = f"openvino {self.version()}"
        core = _core()
        try:
            model = core.read_model(str(model_path))
        except Exception as exc:  # the frontend's report names the ops it cannot convert
            text = str(exc)
            return ModelQuery(runtime, device, {}, "read", _first_lines(text), _failed_ops(text))
        tensors: dict[str, tuple[str, ...]] = {}
        try:
            tensors = _unsupported_per_tensor(model, core.query_model(model, device))
            if not any(tensors.values()):
                core.compile_model(model, device)
        except Exception as exc:
            text = str(exc)
            return ModelQuery(
                runtime, device, tensors, "compile", _first_lines(text), _failed_ops(text)
            )
        return ModelQuery(runtime, device, tensors)

    def open(self, model_path: Path, options: SessionOptions) -> Runner:
        config = options.configuration
        self.require(config.provider)
        reason = self.precision_unavailable(config.precision, config.provider)
        if reason:
            raise UnavailableError(reason)
        return OpenVinoRunner(model_path, options)


# ml_dtypes element types numpy has no code for, as OpenVINO types; 4-bit ones are packed
_RAW_TYPES = {
    "bfloat16": "bf16",
    "float8_e4m3fn": "f8e4m3",
    "float8_e5m2": "f8e5m2",
    "int4": "i4",
    "uint4": "u4",
    "float4_e2m1fn": "f4e2m1",
}


def _ov_input(value: Any) -> Any:
    """A node-test input as OpenVINO takes it: ml_dtypes arrays as raw bits in an ov.Tensor."""
    import openvino as ov
    from onnx import TensorProto, numpy_helper

    if isinstance(value, TensorProto):
        value = numpy_helper.to_array(value)
    value = np.asarray(value)  # not ascontiguousarray: that turns 0-d scalars into shape (1,)
    if value.dtype.name not in _RAW_TYPES:
        return value
    raw = value.copy(order="C").reshape(-1).view(np.uint8)
    if value.dtype.itemsize == 1 and _RAW_TYPES[value.dtype.name] in {"i4", "u4", "f4e2m1"}:
        nibbles = np.append(raw & 0x0F, [0] * (raw.size % 2)).astype(np.uint8)
        raw = (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)  # low nibble first
    kind = getattr(ov.Type, _RAW_TYPES[value.dtype.name])
    return ov.Tensor(raw, ov.Shape(list(value.shape)), kind)


def run_once(model_bytes: bytes, inputs: list[Any], device: str = "CPU") -> str:
    """'' when OpenVINO reads, compiles and runs the model on the inputs, else its error."""
    import onnx

    graph = onnx.load_from_string(model_bytes).graph
    constants = {init.name for init in graph.initializer}
    names = [value.name for value in graph.input if value.name not in constants]
    try:
        with tempfile.TemporaryDirectory(prefix="optiboard-ov-") as tmp:
            path = Path(tmp) / "model.onnx"
            path.write_bytes(model_bytes)
            compiled = _core().compile_model(_core().read_model(str(path)), device)
        ports = {name for port in compiled.inputs for name in port.get_names()}
        feeds = {  # inputs OpenVINO folded away (e.g. CastLike's 'like') have no port to feed
            n: _ov_input(v)
            for n, v in zip(names, inputs, strict=False)
            if v is not None and n in ports
        }
        compiled.create_infer_request().infer(feeds)
    except Exception as exc:  # the failure is the measurement
        return _first_lines(str(exc), limit=2)[:300] or type(exc).__name__
    return ""
