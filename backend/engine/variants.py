"""Build one model variant per Configuration: fix shapes, simplify, convert precision.

Everything is written under a private temporary folder in workdir and only the finished model is
renamed into place, so a failed build never leaves a file that looks like a result.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from backend import ort_tools
from backend.counts import counted
from backend.engine.calibration import (
    FeedReader,
    batched_feeds,
    finish_kept_in_fp32,
    input_batch,
    keep_attention_in_float,
    nodes_kept_in_fp32,
)
from backend.engine.inputs import (
    random_inputs,
    specs_of_model,
    value_ranges_of_model,
)
from backend.engine.profile import KEPT_IN_FP32, name_nodes
from backend.engine.shapes import fix_shapes, shapes_complete
from backend.errors import UserError
from backend.models.inspect import op_histogram
from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, Precision

CONV_OPS = {"Conv", "ConvTranspose"}
SEVEN_BIT = " in 7 bits (reduce_range: ONNX Runtime's U8S8 kernels cannot saturate)"


class OptimizationError(UserError):
    """This graph cannot be turned into the requested variant; the message says why."""


@dataclass
class Variant:
    """A built model file plus what was done to it and what the user should know."""

    path: Path
    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    node_count_before: int = 0
    node_count_after: int = 0
    size_bytes: int = 0


@dataclass
class _Build:
    """State passed between the build steps of one variant."""

    model: onnx.ModelProto
    config: Configuration
    tmpdir: Path
    calibration: list[dict[str, np.ndarray]] | None
    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def save(self, name: str, model: onnx.ModelProto | None = None) -> Path:
        path = self.tmpdir / name
        onnx.save(model if model is not None else self.model, str(path))
        return path


def _fix_shapes(build: _Build) -> None:
    try:
        build.model = fix_shapes(build.model, build.config, build.steps, build.notes)
    except UserError as exc:
        raise OptimizationError(str(exc)) from None


def _simplify(build: _Build) -> None:
    import onnxslim

    before = len(build.model.graph.node)
    try:
        slimmed = onnxslim.slim(build.model)
    except Exception as exc:  # onnxslim failing is not fatal: the unsimplified graph still runs
        build.notes.append(f"onnxslim could not simplify this graph ({exc}); used it as is")
        return
    build.model = slimmed
    build.steps.append(f"simplified with onnxslim: {before} -> {len(slimmed.graph.node)} nodes")


def _check_loads(path: Path) -> None:
    """ORT must be able to open the file; raises the runtime's own exception if not."""
    with get_runtime("onnxruntime").open(path, SessionOptions.plain(optimization_level="disable")):
        pass


def _to_fp32(build: _Build) -> Path:
    build.steps.append(
        f"kept FP32; ONNX Runtime applies optimization level {build.config.optimization_level!r} "
        "when the session opens"
    )
    return build.save("model.onnx")


def _to_fp16(build: _Build) -> Path:
    from onnxconverter_common import float16

    try:
        keep_io = not build.config.cuda.float16_io
        converted = float16.convert_float_to_float16(build.model, keep_io_types=keep_io)
        onnx.checker.check_model(converted)
        path = build.save("model.onnx", converted)
        _check_loads(path)
    except Exception as exc:
        text = str(exc).replace(str(build.tmpdir / "model.onnx"), "the converted model").strip()
        reason = text.splitlines()[0] if text else type(exc).__name__
        raise OptimizationError(
            f"This graph cannot be converted to FP16: {reason[:300]}; run it in FP32 or INT8."
        ) from exc
    build.steps.append(
        "converted weights and ops to float16, inputs and outputs kept float32"
        if keep_io
        else "converted weights, ops, inputs and outputs to float16"
    )
    return path


def _pre_process(build: _Build, source: Path, prepared: Path) -> None:
    """ORT's recommended pre-quantization pass: shape inference and graph fusions. Its symbolic
    shape inference runs only where ONNX's own leaves a shape unknown or the graph has subgraphs:
    elsewhere it changed no quantized node or weight (tests/backend/engine/test_variants.py), and
    the sympy it imports cost each INT8 child 0.4 CPU-s."""
    ort_tools.without_torch()  # its symbolic shape inference lives in onnxruntime.tools
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        quant_pre_process(
            str(source), str(prepared), skip_symbolic_shape=shapes_complete(build.model)
        )
    except Exception as exc:  # pre-processing only helps; quantize the graph as it is
        build.notes.append(f"quantization pre-processing failed ({exc}); quantized without it")
        shutil.copyfile(source, prepared)


def _to_int8_dynamic(build: _Build) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = build.save("float.onnx")
    prepared = build.tmpdir / "prepared.onnx"
    path = build.tmpdir / "model.onnx"
    _pre_process(build, source, prepared)
    try:
        quantize_dynamic(
            str(prepared),
            str(path),
            weight_type=QuantType.QInt8,
            reduce_range=build.config.int8_reduce_range,
        )
    except Exception as exc:
        raise OptimizationError(
            f"This graph cannot be quantized to dynamic INT8: {exc}; run it in FP32 or FP16."
        ) from exc
    build.steps.append(
        f"quantize_dynamic: weights QInt8{SEVEN_BIT if build.config.int8_reduce_range else ''}, "
        "activations quantized at run time"
    )
    if CONV_OPS & set(op_histogram(build.model)):
        build.notes.append(CONV_DYNAMIC_EXPECTATION)
    return path


# Said when the variant is built; the measured speed against FP32 replaces it (jobs/annotate)
CONV_DYNAMIC_EXPECTATION = (
    "Dynamic INT8 turns Conv into ConvInteger, which has no fast CPU kernel and quantizes "
    "activations at run time: expect it to be much slower than FP32 on CPU; use static INT8 "
    "(QDQ) for conv nets."
)


def _calibration_feeds(build: _Build, method: str) -> list[dict[str, np.ndarray]]:
    """The calibration samples both runtimes' static INT8 use: the file's, or seeded random."""
    config = build.config
    if build.calibration is not None:
        if not build.calibration:
            raise UserError("The calibration data holds no samples; give at least one.")
        feeds = build.calibration
        source = "from the calibration file"
    else:
        # one sample per feed, whatever the variant's batch; batched_feeds joins them below
        specs = [
            {**spec, "shape": [None, *spec["shape"][1:]]} for spec in specs_of_model(build.model)
        ]
        ranges = value_ranges_of_model(build.model)
        count = max(1, config.calibration_samples)
        feeds = random_inputs(specs, 1, dict(config.symbolic_dims), count, seed=0, ranges=ranges)
        source = "random"
        build.notes.append("random calibration data: accuracy numbers are indicative only")
    build.steps.append(f"{method}, {counted(len(feeds), 'calibration sample')} ({source})")
    return batched_feeds(feeds, input_batch(build.model))


def _to_int8_static(build: _Build) -> Path:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    source = build.save("float.onnx")
    prepared = build.tmpdir / "prepared.onnx"
    path = build.tmpdir / "model.onnx"
    feeds = _calibration_feeds(build, "quantize_static QDQ per-channel")

    class Reader(FeedReader, CalibrationDataReader):  # ORT imported lazily, so defined here
        pass

    reader = Reader(feeds)
    _pre_process(build, source, prepared)
    excluded = list(keep_attention_in_float(prepared))
    if excluded:
        build.steps.append(
            f"kept attention in FP32 ({len(excluded)} Softmax and activation-by-activation "
            "MatMul nodes): int8 attention scores lose too much accuracy"
        )
    if build.config.fp32_nodes:
        try:
            kept = nodes_kept_in_fp32(build.config.fp32_nodes, prepared)
        except UserError as exc:
            raise OptimizationError(str(exc)) from None
        shown = ", ".join(build.config.fp32_nodes[:8])
        build.steps.append(f"kept {len(build.config.fp32_nodes)} node(s) in FP32: {shown}")
        excluded += kept
    try:
        quantize_static(
            str(prepared),
            str(path),
            reader,
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,  # U8S8: the fast int8 path on x86 (VNNI)
            weight_type=QuantType.QInt8,
            nodes_to_exclude=excluded,
            reduce_range=build.config.int8_reduce_range,
        )
    except Exception as exc:
        raise OptimizationError(
            f"This graph cannot be quantized to static INT8: {exc}; run it in FP32 or FP16, or "
            "check that the calibration data matches the inputs."
        ) from exc
    if build.config.int8_reduce_range:
        build.steps.append(f"weights{SEVEN_BIT}")
    # attention too: its profile showed the excluded MatMuls running as QLinearMatMul
    finish_kept_in_fp32(path, excluded, excluded, KEPT_IN_FP32)
    return path


def _for_openvino(build: _Build) -> Path:
    """FP32, BF16 and FP16 weight compression are all OpenVINO compile settings on this graph."""
    done = {
        Precision.FP32: "compiles it with INFERENCE_PRECISION_HINT f32",
        Precision.BF16: "compiles it with INFERENCE_PRECISION_HINT bf16",
        Precision.FP16: "compresses the weights to FP16 when it compiles (f32 arithmetic)",
    }
    build.steps.append(f"kept FP32; OpenVINO {done[build.config.precision]}")
    return build.save("model.onnx")


def _to_int8_nncf(build: _Build) -> Path:
    """NNCF post-training quantization (its ONNX backend, QDQ), on ORT static INT8's samples."""
    import nncf

    feeds = _calibration_feeds(build, "NNCF post-training quantization (QDQ, CPU preset)")
    try:
        quantized = nncf.quantize(build.model, nncf.Dataset(feeds), subset_size=len(feeds))
    except Exception as exc:
        raise OptimizationError(
            f"NNCF cannot quantize this graph to INT8: {exc}; run it in FP32 or BF16, or check "
            "that the calibration data matches the inputs."
        ) from exc
    return build.save("model.onnx", quantized)


PRECISION_BUILDERS: dict[str, dict[Precision, Callable[[_Build], Path]]] = {
    "onnxruntime": {
        Precision.FP32: _to_fp32,
        Precision.FP16: _to_fp16,
        Precision.INT8_DYNAMIC: _to_int8_dynamic,
        Precision.INT8_STATIC: _to_int8_static,
    },
    "openvino": {
        Precision.FP32: _for_openvino,
        Precision.BF16: _for_openvino,
        Precision.FP16: _for_openvino,
        Precision.INT8_STATIC: _to_int8_nncf,
    },
}


def variant_name(source: Path, config: Configuration) -> str:
    """A file name made of what changes the built graph (not provider, threads or ORT level)."""
    parts = [source.stem, config.precision.value]
    if config.backend == "openvino" and config.precision == Precision.INT8_STATIC:
        parts.append("nncf")
    parts.append(f"b{config.batch_size}" if config.fixed_shapes else "dynamic")
    parts += [f"{k}{v}" for k, v in config.symbolic_dims]
    if config.simplify:
        parts.append("slim")
    if config.precision == Precision.INT8_STATIC:
        parts.append((config.calibration_sha256 or "random")[:12])
        if config.calibration_sha256 is None:
            parts.append(f"n{config.calibration_samples}")
        if config.fp32_nodes:
            digest = hashlib.sha256("\n".join(config.fp32_nodes).encode()).hexdigest()
            parts.append(f"fp32keep{len(config.fp32_nodes)}-{digest[:8]}")
    if config.int8_reduce_range:  # only ever set on ONNX Runtime's INT8 (Configuration)
        parts.append("w7")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts)) + ".onnx"


def build_variant(
    source: Path,
    config: Configuration,
    workdir: Path,
    calibration: list[dict[str, np.ndarray]] | None = None,
) -> Variant:
    """Write the model variant that config asks for under workdir and describe what was done."""
    source = Path(source)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        model = onnx.load(str(source))
    except Exception as exc:
        raise UserError(f"{source.name} cannot be read as an ONNX model: {exc}") from exc
    before = len(model.graph.node)
    name_nodes(model)  # names that lead the profile and the mixed-precision exclusions back
    tmpdir = Path(tempfile.mkdtemp(prefix=".build-", dir=workdir))
    try:
        build = _Build(model=model, config=config, tmpdir=tmpdir, calibration=calibration)
        _fix_shapes(build)
        if config.simplify:
            _simplify(build)
        builders = PRECISION_BUILDERS.get(config.backend, PRECISION_BUILDERS["onnxruntime"])
        if config.precision not in builders:
            raise OptimizationError(
                f"{config.backend} cannot build {config.precision.label}; pick one of "
                f"{', '.join(p.label for p in builders)}."
            )
        built = builders[config.precision](build)
        final = workdir / variant_name(source, config)
        os.replace(built, final)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    after = len(onnx.load(str(final), load_external_data=False).graph.node)
    return Variant(
        path=final,
        steps=build.steps,
        notes=build.notes,
        node_count_before=before,
        node_count_after=after,
        size_bytes=final.stat().st_size,
    )


def save_ort_optimized(model_path: Path, level: str, out_path: Path) -> Path:
    """Write the graph ONNX Runtime runs after its own optimizations, for download and Netron."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(f".{out_path.name}.partial")
    options = SessionOptions.plain(optimized_model_path=partial, optimization_level=level)
    try:
        with get_runtime("onnxruntime").open(model_path, options):
            pass  # opening the session is what writes the optimized graph
        os.replace(partial, out_path)
    finally:
        partial.unlink(missing_ok=True)
    return out_path
