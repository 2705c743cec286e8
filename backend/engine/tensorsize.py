"""Tensors too large for GPU kernels, refused before a GPU session opens.

cuDNN and most CUDA kernels index a tensor with 32-bit integers: at 2^31 elements or more ONNX
Runtime's CUDA provider fails mid-run ("CUDNN failure 3000: CUDNN_STATUS_NOT_SUPPORTED ..."), after
the variant was built and the session opened. The sizes are known before that from the inputs and
from ONNX shape inference at the configuration's batch and dimensions, so the configuration is
refused up front with the tensor, its element count and the largest batch that fits.
"""

from __future__ import annotations

import math
from pathlib import Path

import onnx

from backend.engine.inputs import concrete_shape, input_specs_of
from backend.errors import UserError

INDEX_LIMIT = 2**31  # elements a 32-bit signed index cannot reach


def check_gpu_tensor_sizes(
    source: Path, batch_size: int, dims: dict[str, int], provider: str
) -> None:
    """UserError naming the first input (then intermediate) tensor of >= 2^31 elements."""
    for spec in input_specs_of(source):
        shape = concrete_shape(spec["shape"], batch_size, dims, spec["name"])
        _refuse(f"input {spec['name']!r}", list(shape), batch_size, provider)
    for name, shape in _inferred_shapes(source, batch_size, dims):
        _refuse(f"tensor {name!r}", shape, batch_size, provider)


def _refuse(what: str, shape: list[int], batch_size: int, provider: str) -> None:
    elements = math.prod(shape)
    if elements < INDEX_LIMIT:
        return
    per_sample = elements // batch_size if shape and shape[0] == batch_size else 0
    fits = (INDEX_LIMIT - 1) // per_sample if per_sample else 0
    advice = f"pick a batch of at most {fits:,}" if fits else "pick a smaller batch or dimensions"
    raise UserError(
        f"At batch {batch_size} the {what} would hold {elements:,} elements (shape {shape}), past "
        f"the 2^31 = {INDEX_LIMIT:,} that cuDNN and CUDA kernels can index on the {provider} "
        f"provider; {advice}."
    )


def _inferred_shapes(
    source: Path, batch_size: int, dims: dict[str, int]
) -> list[tuple[str, list[int]]]:
    """Every intermediate tensor ONNX shape inference sizes fully at these values; [] where it
    cannot run (the runtime then reports what it finds)."""
    try:
        model = onnx.load(str(source), load_external_data=False)
        initializers = {init.name for init in model.graph.initializer}
        for value in [v for v in model.graph.input if v.name not in initializers]:
            spec = {"shape": [d.dim_param or d.dim_value or "?" for d in _dims(value)]}
            shape = concrete_shape(spec["shape"], batch_size, dims, value.name)
            for dim, size in zip(_dims(value), shape, strict=True):
                dim.dim_value = size
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except (UserError, ValueError, onnx.shape_inference.InferenceError, OSError):
        return []
    found = []
    for value in [*inferred.graph.value_info, *inferred.graph.output]:
        shape = [d.dim_value if d.HasField("dim_value") else 0 for d in _dims(value)]
        if shape and all(size > 0 for size in shape):
            found.append((value.name, shape))
    return found


def _dims(value: onnx.ValueInfoProto) -> list:
    return list(value.type.tensor_type.shape.dim)
