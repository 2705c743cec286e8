"""A Triton model repository for a chosen configuration, checked by Triton's own model_config.

The zip holds `<name>/1/model.onnx`, `<name>/config.pbtxt` (platform onnxruntime_onnx, the
batching policy, the instance group, on GPU the TensorRT accelerator with its precision),
`<name>/perf_analyzer.txt`, the command that reproduces the measurement, `<name>/notes.txt` where
the deployment runs otherwise than the sweep (deployment_notes), and
`local-python-backend/<name>/`, the Python-backend variant Optiboard's local server loads. Both
are written by repository.py's one writer, and every config text is parsed with
`tritonclient.grpc.model_config_pb2.ModelConfig` before it is zipped, as Triton would parse it.
"""

from __future__ import annotations

import os
import re
import tempfile
import zipfile
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

import onnx
from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tritonclient.grpc import model_config_pb2

from backend.errors import UserError
from backend.launch.folders import owned_folder
from backend.serving.repository import Deployment, ServedModel, plan_model, write_repository
from backend.serving.repository import config_text as repository_config
from backend.serving.types import BatchingPolicy, LoadSpec, Scenario
from backend.specs import MEASURE_PRESETS, MeasureSettings

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# TensorRT accelerator precision per Optiboard precision (onnxruntime_backend's precision_mode)
_TRT_PRECISION = {"fp32": "FP32", "fp16": "FP16", "int8_dynamic": "INT8", "int8_static": "INT8"}
LOCAL = "local-python-backend"  # the zip's folder holding the repository the local server loads
NOTES = "notes.txt"  # beside config.pbtxt, where the deployment runs otherwise than the sweep


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


def served_model(target: ServingTarget, onnx_path: Path) -> ServedModel:
    """What the repository serves, planned by the local server's own planner (dims without a
    size become -1); a batching policy on a fixed batch axis is refused with the way out."""
    policy = target.policy
    served = plan_model(onnx_path, policy, variable_dims=True)
    if served.fixed_batch_note and (policy.dynamic_batching or policy.max_batch_size > 1):
        first = served.inputs[0]
        axis = f"a fixed batch axis of {first.dims[0]}" if first.dims else "no batch axis"
        raise UserError(
            f"Input {first.name!r} has {axis}, so Triton cannot batch requests; "
            "export with dynamic batching off and max batch size 1 (a fixed-batch server), "
            "or convert the model with a dynamic batch axis."
        )
    return replace(served, name=target.name)


def deployment_notes(served: ServedModel, target: ServingTarget) -> list[str]:
    """Where the exported deployment runs otherwise than the sweep and Optiboard's local server."""
    if target.device is not Device.CPU or not served.session_config:
        return []
    entries = ", ".join(f"{key}={value}" for key, value in served.session_config)
    return [
        f"On this CPU, which has no VNNI, this int8 model's sweep sessions and Optiboard's local "
        f"server run with {entries} (exact U8U8 int8 kernels). Triton's ONNX Runtime backend, "
        "which config.pbtxt names, has no parameter for it, so on a CPU without VNNI the "
        "deployment runs ONNX Runtime's U8S8 kernels, which can saturate; sweep with "
        "--int8-matmul u8s8 to see their outputs and speed here, or quantize with 7-bit weights "
        "(--reduce-range), which those kernels run exactly in any ONNX Runtime."
    ]


def notes_in(archive: zipfile.ZipFile, name: str) -> list[str]:
    """The deployment notes an exported zip holds for model `name`, as export_repository wrote
    them (read back rather than planned again), from the archive the caller opened to list it,
    so `serve export` reads its zip once."""
    if f"{name}/{NOTES}" not in archive.namelist():
        return []
    return archive.read(f"{name}/{NOTES}").decode().strip().split("\n\n")


def deployment_of(target: ServingTarget) -> Deployment:
    gpu = target.device is Device.GPU
    return Deployment(gpu=gpu, trt_precision=_TRT_PRECISION[target.precision] if gpu else None)


def config_text(target: ServingTarget, onnx_path: Path) -> str:
    """The exported config.pbtxt (repository.py's writer), parsed by Triton's protobuf first."""
    text = repository_config(served_model(target, onnx_path), deployment_of(target))
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


def exported_name(model_id: int) -> str:
    """The Triton model name `serve export MODEL` writes, which every perf_analyzer line shown
    for that model's sweeps and studies must name."""
    return f"model_{model_id}"


def perf_analyzer_command(
    name: str,
    load: LoadSpec,
    url: str = "localhost:8001",
    measure: MeasureSettings = MEASURE_PRESETS["quick"],
) -> str:
    """The perf_analyzer line that reproduces a load point (gRPC, async, p99 for stability)
    under the stability rule the point was judged by (`measure`'s tolerance: the quick preset's
    25% that the load generator uses unless told otherwise, serving.stability)."""
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
        f"--stability-percentage={100 * measure.stability_tolerance:g}",
    ]
    return " ".join(parts)


def export_repository(
    target: ServingTarget, onnx_path: Path, dest: Path, load: LoadSpec | None = None
) -> Path:
    """Write the repository zip at `dest` atomically: a failure leaves nothing behind.

    `<name>/` is the deployment (onnxruntime backend); `local-python-backend/<name>/` is the
    Python-backend repository Optiboard's local server loads, written by the same writer (the
    ONNX file is in both, so each folder is a repository on its own).
    """
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
    served = served_model(target, onnx_path)
    load = load or LoadSpec(Scenario.CONCURRENCY, concurrency=target.policy.max_batch_size)
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=dest.parent, suffix=".zip.part")
    os.close(handle)
    try:
        with owned_folder("export") as root:
            write_repository(root / "deploy", onnx_path, served, deployment_of(target))
            write_repository(root / LOCAL, onnx_path, served)
            for config in root.glob("*/*/config.pbtxt"):
                parse_config(config.read_text())
            (root / "deploy" / target.name / "perf_analyzer.txt").write_text(
                perf_analyzer_command(target.name, load) + "\n"
            )
            notes = deployment_notes(served, target)
            if notes:
                (root / "deploy" / target.name / NOTES).write_text("\n\n".join(notes) + "\n")
            with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(p for p in root.rglob("*") if p.is_file()):
                    relative = path.relative_to(root)
                    parts = relative.parts[1:] if relative.parts[0] == "deploy" else relative.parts
                    archive.write(path, "/".join(parts))
        os.replace(temporary, dest)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return dest
