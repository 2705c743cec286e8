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

from backend.engine.calibration import (
    FeedReader,
    batched_feeds,
    finish_kept_in_fp32,
    input_batch,
    keep_attention_in_float,
)
from backend.engine.inputs import (
    concrete_shape,
    random_inputs,
    specs_of_model,
    value_ranges_of_model,
)
from backend.engine.profile import KEPT_IN_FP32, name_nodes
from backend.errors import UserError
from backend.models.inspect import op_histogram
from backend.runtimes import get_backend
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, Precision

CONV_OPS = {"Conv", "ConvTranspose"}


class OptimizationError(UserError):
    """This graph cannot be turned into the requested variant; the message says why."""


@dataclass
class Variant:
    """A built model file plus what was done to it and what the user should know."""

    path: Path
    precision: Precision
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


# --- shapes -------------------------------------------------------------------------------------


def _batch_dim_names(model: onnx.ModelProto) -> set[str]:
    names = set()
    for spec in specs_of_model(model):
        if spec["shape"] and isinstance(spec["shape"][0], str):
            names.add(spec["shape"][0])
    return names


def _all_dim_params(model: onnx.ModelProto) -> set[str]:
    params = set()
    for value in list(model.graph.input) + list(model.graph.output):
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param:
                params.add(dim.dim_param)
    return params


def _fix_shapes(build: _Build) -> None:
    """Fix the batch (if fixed_shapes) and every other named dim to the configured values."""
    from onnxruntime.tools.onnx_model_utils import (
        fix_output_shapes,
        make_dim_param_fixed,
        make_input_shape_fixed,
    )

    config = build.config
    model = build.model
    dims = dict(config.symbolic_dims)
    batch_names = _batch_dim_names(model)
    unknown = sorted(set(dims) - _all_dim_params(model))
    if unknown:
        build.notes.append(
            f"symbolic dimension(s) {', '.join(unknown)} are not in this model and were ignored"
        )
    specs = specs_of_model(model)
    if config.fixed_shapes:
        for spec in specs:
            shape = concrete_shape(spec["shape"], config.batch_size, dims, spec["name"])
            try:
                make_input_shape_fixed(model.graph, spec["name"], list(shape))
            except ValueError as exc:
                raise OptimizationError(
                    f"Input {spec['name']!r} cannot be fixed to shape {list(shape)}: {exc}."
                ) from exc
        build.steps.append(f"fixed batch to {config.batch_size}")
    else:
        for spec in specs:  # a missing non-batch dim fails here, with the input's name
            concrete_shape(spec["shape"], 1, dims, spec["name"])
    for name, value in sorted(dims.items()):
        if config.fixed_shapes or name not in batch_names:
            make_dim_param_fixed(model.graph, name, value)
    fixed_names = [n for n in sorted(dims) if n not in unknown and n not in batch_names]
    if fixed_names:
        build.steps.append("fixed " + ", ".join(f"{n}={dims[n]}" for n in fixed_names))
    if not config.fixed_shapes:
        build.steps.append("kept the batch dimension dynamic")
    del model.graph.value_info[:]  # stale intermediate shapes would contradict the new ones
    build.model = onnx.shape_inference.infer_shapes(model)
    if config.fixed_shapes:
        fix_output_shapes(build.model)


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


# --- precisions ---------------------------------------------------------------------------------


def _check_loads(path: Path) -> None:
    """ORT must be able to open the file; raises the runtime's own exception if not."""
    options = SessionOptions(provider="cpu", optimization_level="disable")
    with get_backend("onnxruntime").open(path, options):
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
        converted = float16.convert_float_to_float16(build.model, keep_io_types=True)
        onnx.checker.check_model(converted)
        path = build.save("model.onnx", converted)
        _check_loads(path)
    except Exception as exc:
        text = str(exc).replace(str(build.tmpdir / "model.onnx"), "the converted model").strip()
        reason = text.splitlines()[0] if text else type(exc).__name__
        raise OptimizationError(
            f"This graph cannot be converted to FP16: {reason[:300]}; run it in FP32 or INT8."
        ) from exc
    build.steps.append("converted weights and ops to float16, inputs and outputs kept float32")
    return path


def _pre_process(build: _Build, source: Path, prepared: Path) -> None:
    """ORT's recommended pre-quantization pass: shape inference and graph fusions."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        quant_pre_process(str(source), str(prepared))
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
        quantize_dynamic(str(prepared), str(path), weight_type=QuantType.QInt8)
    except Exception as exc:
        raise OptimizationError(
            f"This graph cannot be quantized to dynamic INT8: {exc}; run it in FP32 or FP16."
        ) from exc
    build.steps.append("quantize_dynamic: weights QInt8, activations quantized at run time")
    if CONV_OPS & set(op_histogram(build.model)):
        build.notes.append(
            "dynamic INT8 turns Conv into ConvInteger, which has no fast CPU kernel and quantizes "
            "activations at run time: expect it to be much slower than FP32 on CPU; use static "
            "INT8 (QDQ) for conv nets"
        )
    return path


def _calibration_feeds(build: _Build) -> list[dict[str, np.ndarray]]:
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
    build.steps.append(
        f"quantize_static QDQ per-channel, {len(feeds)} calibration samples ({source})"
    )
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
    feeds = _calibration_feeds(build)

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
    excluded += _kept_in_fp32(build, prepared)
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
        )
    except Exception as exc:
        raise OptimizationError(
            f"This graph cannot be quantized to static INT8: {exc}; run it in FP32 or FP16, or "
            "check that the calibration data matches the inputs."
        ) from exc
    # attention too: its profile showed the excluded MatMuls running as QLinearMatMul
    finish_kept_in_fp32(path, excluded, excluded, KEPT_IN_FP32)
    return path


def _kept_in_fp32(build: _Build, prepared: Path) -> list[str]:
    """The configuration's FP32 nodes (mixed precision) as named in the prepared graph.

    A name matches itself or the node ORT's pre-processing fused it into ('dense/MatMulAddFusion').
    """
    wanted = list(build.config.fp32_nodes)
    if not wanted:
        return []
    names = [n.name for n in onnx.load(str(prepared), load_external_data=False).graph.node]
    found = {w: [n for n in names if n == w or n.startswith(f"{w}/")] for w in wanted}
    missing = [w for w, hits in found.items() if not hits]
    if missing:
        raise OptimizationError(
            f"Node(s) {', '.join(missing[:5])} to keep in FP32 are not in this graph; pick names "
            "from the Graph page or the profile."
        )
    build.steps.append(f"kept {len(wanted)} node(s) in FP32: {', '.join(wanted[:8])}")
    return sorted({n for hits in found.values() for n in hits})


PRECISION_BUILDERS: dict[Precision, Callable[[_Build], Path]] = {
    Precision.FP32: _to_fp32,
    Precision.FP16: _to_fp16,
    Precision.INT8_DYNAMIC: _to_int8_dynamic,
    Precision.INT8_STATIC: _to_int8_static,
}


def variant_name(source: Path, config: Configuration) -> str:
    """A file name made of what changes the built graph (not provider, threads or ORT level)."""
    parts = [source.stem, config.precision.value]
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
        built = PRECISION_BUILDERS[config.precision](build)
        final = workdir / variant_name(source, config)
        os.replace(built, final)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    after = len(onnx.load(str(final), load_external_data=False).graph.node)
    return Variant(
        path=final,
        precision=config.precision,
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
    options = SessionOptions(provider="cpu", optimization_level=level, optimized_model_path=partial)
    try:
        with get_backend("onnxruntime").open(model_path, options):
            pass  # opening the session is what writes the optimized graph
        os.replace(partial, out_path)
    finally:
        partial.unlink(missing_ok=True)
    return out_path
