"""A Triton model repository for a chosen configuration, checked by Triton's own model_config.

The zip holds `<name>/1/model.onnx`, `<name>/config.pbtxt` (platform onnxruntime_onnx, the
batching policy, the instance group, on GPU the TensorRT accelerator with its precision) and
`<name>/perf_analyzer.txt`, the command that reproduces the measurement. Every config text is
parsed with `tritonclient.grpc.model_config_pb2.ModelConfig` before it is written, as Triton
would parse it on load.
"""

from __future__ import annotations

import os
import re
import tempfile
import zipfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import onnx
from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tritonclient.grpc import model_config_pb2

from backend.errors import UserError
from backend.serving.types import BatchingPolicy, LoadSpec, Scenario

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_TRITON_TYPES = {
    onnx.TensorProto.FLOAT: "TYPE_FP32",
    onnx.TensorProto.FLOAT16: "TYPE_FP16",
    onnx.TensorProto.BFLOAT16: "TYPE_BF16",
    onnx.TensorProto.DOUBLE: "TYPE_FP64",
    onnx.TensorProto.INT8: "TYPE_INT8",
    onnx.TensorProto.UINT8: "TYPE_UINT8",
    onnx.TensorProto.INT16: "TYPE_INT16",
    onnx.TensorProto.INT32: "TYPE_INT32",
    onnx.TensorProto.INT64: "TYPE_INT64",
    onnx.TensorProto.BOOL: "TYPE_BOOL",
    onnx.TensorProto.STRING: "TYPE_STRING",
}
# TensorRT accelerator precision per Optiboard precision (onnxruntime_backend's precision_mode)
_TRT_PRECISION = {"fp32": "FP32", "fp16": "FP16", "int8_dynamic": "INT8", "int8_static": "INT8"}


class Device(StrEnum):
    CPU = "cpu"
    GPU = "gpu"


@dataclass(frozen=True)
class Tensor:
    """One model input or output as Triton's config names it (dims without the batch axis)."""

    name: str
    data_type: str
    dims: tuple[int, ...]


@dataclass(frozen=True)
class ServingTarget:
    """The configuration to deploy: which policy, on which device, at which precision."""

    name: str
    policy: BatchingPolicy
    device: Device = Device.CPU
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise UserError(
                f"{self.name!r} cannot name a Triton model; use letters, digits, '_', '.' or '-' "
                "(up to 64, starting with a letter or digit)."
            )
        if self.device is Device.GPU and self.precision not in _TRT_PRECISION:
            known = ", ".join(_TRT_PRECISION)
            raise UserError(
                f"TensorRT has no precision mode for {self.precision!r}; choose one of {known}."
            )


def _tensors(values: list[onnx.ValueInfoProto], batched: bool) -> list[Tensor]:
    tensors = []
    for value in values:
        shape = value.type.tensor_type.shape.dim
        dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in shape)
        data_type = _TRITON_TYPES.get(value.type.tensor_type.elem_type)
        if data_type is None:
            raise UserError(
                f"Tensor {value.name!r} has a type Triton cannot serve; export it as float."
            )
        tensors.append(Tensor(value.name, data_type, dims[1:] if batched else dims))
    return tensors


def model_tensors(
    model: onnx.ModelProto, policy: BatchingPolicy
) -> tuple[list[Tensor], list[Tensor], bool]:
    """Inputs, outputs and whether they share a free batch axis.

    A batching policy on a model whose batch axis is fixed is refused with the way out.
    """
    initializers = {init.name for init in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers]
    fixed = {
        v.name: v.type.tensor_type.shape.dim[0].dim_value
        for v in inputs
        if v.type.tensor_type.shape.dim and v.type.tensor_type.shape.dim[0].HasField("dim_value")
    }
    batched = policy.max_batch_size > 1 or policy.dynamic_batching
    if fixed and batched:
        name, size = next(iter(fixed.items()))
        raise UserError(
            f"Input {name!r} has a fixed batch axis of {size}, so Triton cannot batch requests; "
            "export with dynamic batching off and max batch size 1 (a fixed-batch server), "
            "or convert the model with a dynamic batch axis."
        )
    free = not fixed
    return _tensors(inputs, free), _tensors(list(model.graph.output), free), free


def _tensor_block(kind: str, tensors: list[Tensor]) -> str:
    items = ",\n".join(
        f'  {{ name: "{t.name}" data_type: {t.data_type} dims: [ {", ".join(map(str, t.dims))} ] }}'
        for t in tensors
    )
    return f"{kind} [\n{items}\n]\n"


def config_text(target: ServingTarget, model: onnx.ModelProto) -> str:
    """The config.pbtxt for the target, parsed by Triton's protobuf before it is returned."""
    policy = target.policy
    inputs, outputs, batch_axis = model_tensors(model, policy)
    max_batch = policy.max_batch_size if batch_axis else 0  # 0: Triton passes shapes as they are
    lines = [
        f'name: "{target.name}"',
        'platform: "onnxruntime_onnx"',
        f"max_batch_size: {max_batch}",
    ]
    text = "\n".join(lines) + "\n"
    text += _tensor_block("input", inputs) + _tensor_block("output", outputs)
    if policy.dynamic_batching and max_batch:
        preferred = ", ".join(map(str, policy.preferred_batch_sizes))
        text += "dynamic_batching {\n"
        if preferred:
            text += f"  preferred_batch_size: [ {preferred} ]\n"
        text += f"  max_queue_delay_microseconds: {policy.max_queue_delay_us}\n"
        if policy.preserve_ordering:
            text += "  preserve_ordering: true\n"
        text += "}\n"
    kind = "KIND_GPU" if target.device is Device.GPU else "KIND_CPU"
    text += f"instance_group [ {{ count: {policy.instance_count} kind: {kind} }} ]\n"
    if target.device is Device.GPU:
        mode = _TRT_PRECISION[target.precision]
        text += (
            "optimization { execution_accelerators { gpu_execution_accelerator : [ {\n"
            '  name : "tensorrt"\n'
            f'  parameters {{ key: "precision_mode" value: "{mode}" }}\n'
            "} ] } }\n"
        )
    parse_config(text)
    return text


def parse_config(text: str) -> model_config_pb2.ModelConfig:
    """Parse a config.pbtxt as Triton does; a text that does not parse is one sentence."""
    try:
        config = text_format.Parse(text, model_config_pb2.ModelConfig())
    except text_format.ParseError as error:
        hint = (
            " (Triton's text format has no // comments; start comments with #)"
            if "//" in text
            else ""
        )
        message = str(error).split(" : ", 1)[-1].rstrip(".")
        raise UserError(
            f"This config.pbtxt does not parse at line {error.GetLine()}, column "
            f"{error.GetColumn()} ({message}){hint}; fix that line."
        ) from None
    preferred = list(config.dynamic_batching.preferred_batch_size)
    if config.HasField("dynamic_batching") and config.max_batch_size < 1:
        raise UserError(
            "dynamic_batching needs max_batch_size of 1 or more; raise it or remove the block."
        )
    too_big = [p for p in preferred if p > config.max_batch_size]
    if too_big:
        raise UserError(
            f"preferred_batch_size {too_big} exceeds max_batch_size {config.max_batch_size}; "
            "lower them or raise the maximum."
        )
    return config


def perf_analyzer_command(name: str, load: LoadSpec, url: str = "localhost:8001") -> str:
    """The perf_analyzer line that reproduces a load point (gRPC, async, p99 for stability)."""
    parts = [f"perf_analyzer -m {name}", f"-u {url}", "-i grpc", "--async"]
    if load.samples_per_request > 1:
        parts.append(f"-b {load.samples_per_request}")
    if load.scenario is Scenario.SERVER:
        rate = f"{load.target_rps:g}"
        parts += [f"--request-rate-range={rate}:{rate}:1", "--request-distribution=poisson"]
    else:
        clients = 1 if load.scenario is Scenario.SINGLE_STREAM else load.concurrency
        if load.scenario is Scenario.OFFLINE:
            clients = load.requests or load.concurrency
        parts.append(f"--concurrency-range={clients}:{clients}:1")
    interval_ms = max(1000, int(load.duration_s * 1000))
    parts += [
        f"--measurement-interval={interval_ms}",
        "--percentile=99",
        "--stability-percentage=10",
    ]
    return " ".join(parts)


def export_repository(
    target: ServingTarget, onnx_path: Path, dest: Path, load: LoadSpec | None = None
) -> Path:
    """Write the repository zip at `dest` atomically: a failure leaves nothing behind."""
    try:
        model = onnx.load(str(onnx_path), load_external_data=False)
    except (OSError, DecodeError) as error:
        raise UserError(
            f"Cannot read {onnx_path.name} as an ONNX model ({error}); export the variant again."
        ) from None
    if any(init.data_location == onnx.TensorProto.EXTERNAL for init in model.graph.initializer):
        raise UserError(
            "This model keeps its weights in external files; export a single-file ONNX model."
        )
    config = config_text(target, model)
    load = load or LoadSpec(Scenario.CONCURRENCY, concurrency=target.policy.max_batch_size)
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=dest.parent, suffix=".zip.part")
    os.close(handle)
    try:
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(onnx_path, f"{target.name}/1/model.onnx")
            archive.writestr(f"{target.name}/config.pbtxt", config)
            archive.writestr(
                f"{target.name}/perf_analyzer.txt", perf_analyzer_command(target.name, load) + "\n"
            )
        os.replace(temporary, dest)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return dest
