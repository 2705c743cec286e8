"""Model inputs: concrete shapes from symbolic ones and valid random feeds, read from the graph.

Random float inputs are standard normal (mean 0, std 1), the range of normalised images and
activations that most exported models expect. Integer inputs that index an embedding table get
ids in [0, rows) of that table; other integer inputs get DEFAULT_INT_RANGE. Feeds from a user's
own file are read in backend.engine.npzfeeds.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx

import settings
from backend.errors import UserError

MB = 1 << 20
DEFAULT_INT_RANGE = (0, 2)  # [low, high): valid as an index into any table and as a 0/1 mask
# ops that pass integer ids through unchanged, so a Gather behind them still bounds the input
_ID_PASSTHROUGH_OPS = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"}

Dim = int | str | None


def _is_unknown(dim: Dim) -> bool:
    return dim is None or isinstance(dim, str) or (isinstance(dim, int) and dim <= 0)


def fixed_batch(shape: list[Dim]) -> int | None:
    """The size of an input's fixed batch dimension (its first), or None where the batch is free."""
    first = shape[0] if shape else None
    return first if isinstance(first, int) and first > 0 else None


def runs_at_batch(shape: list[Dim], batch_size: int) -> bool:
    """The fixed-batch rule, for feeds and for submit's refusal: a fixed batch dimension runs
    batch 1 (fed at its own size, as exported) or its fixed size; a free one runs any."""
    fixed = fixed_batch(shape)
    return fixed is None or batch_size in (1, fixed)


def concrete_shape(
    shape: list[Dim], batch_size: int, symbolic_dims: dict[str, int], input_name: str
) -> tuple[int, ...]:
    """The shape to feed: a symbolic first dim is the batch, other names come from symbolic_dims."""
    fixed = fixed_batch(shape)
    if not runs_at_batch(shape, batch_size):
        raise UserError(
            f"Input {input_name!r} has a fixed batch of {fixed}, so it cannot run at batch "
            f"size {batch_size}; use batch size {fixed} or 1, or export the model with a "
            "dynamic batch axis."
        )
    result: list[int] = []
    for index, dim in enumerate(shape):
        if index == 0:
            result.append(batch_size if fixed is None else fixed)
        elif isinstance(dim, str) and dim not in ("", "?"):
            if dim not in symbolic_dims:
                raise UserError(
                    f"Input {input_name!r} has a symbolic dimension {dim!r}; give it a value "
                    f"(e.g. {dim}=128)."
                )
            result.append(int(symbolic_dims[dim]))
        elif _is_unknown(dim):
            raise UserError(
                f"Input {input_name!r} has an unnamed dynamic dimension at position {index}, which "
                "cannot be given a value; export the model with a named or fixed dimension there."
            )
        else:
            assert isinstance(dim, int)
            result.append(dim)
    return tuple(result)


def _dims_of(value: onnx.ValueInfoProto) -> list[Dim]:
    dims: list[Dim] = []
    for dim in value.type.tensor_type.shape.dim:
        if dim.HasField("dim_value") and dim.dim_value > 0:
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param") and dim.dim_param:
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return dims


def specs_of_model(model: onnx.ModelProto) -> list[dict]:
    """[{name, dtype, shape}] of the graph inputs that are real inputs, not initializers."""
    initializers = {init.name for init in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        if not value.type.HasField("tensor_type"):
            raise UserError(
                f"Input {value.name!r} is not a tensor (sequences and maps are not supported)."
            )
        elem_type = value.type.tensor_type.elem_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
        specs.append({"name": value.name, "dtype": np.dtype(dtype).name, "shape": _dims_of(value)})
    return specs


def input_specs_of(model_path: Path) -> list[dict]:
    """[{name, dtype (numpy name), shape (ints, dim names or None)}] read from the ONNX graph."""
    model = onnx.load(str(model_path), load_external_data=False)
    return specs_of_model(model)


def value_ranges_of_model(model: onnx.ModelProto) -> dict[str, tuple[int, int]]:
    """Valid [low, high) id ranges for integer inputs; embedding indices get [0, rows)."""
    graph = model.graph
    rows_of = {init.name: (list(init.dims), init) for init in graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def gather_rows(tensor: str, seen: set[str]) -> int | None:
        """The smallest table size this tensor indexes into, following id-preserving ops."""
        best: int | None = None
        for node in consumers.get(tensor, []):
            rows: int | None = None
            if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == tensor:
                table = rows_of.get(node.input[0])
                if table is not None:
                    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                    dims = table[0]
                    rows = dims[axis] if -len(dims) <= axis < len(dims) else None
            elif node.op_type in _ID_PASSTHROUGH_OPS and node.input[0] == tensor:
                for out in node.output:
                    if out not in seen:
                        seen.add(out)
                        found = gather_rows(out, seen)
                        if found is not None and (rows is None or found < rows):
                            rows = found
            if rows is not None and (best is None or rows < best):
                best = rows
        return best

    ranges: dict[str, tuple[int, int]] = {}
    for spec in specs_of_model(model):
        if not np.issubdtype(np.dtype(spec["dtype"]), np.integer):
            continue
        rows = gather_rows(spec["name"], {spec["name"]})
        ranges[spec["name"]] = (0, int(rows)) if rows else DEFAULT_INT_RANGE
    return ranges


def value_ranges(model_path: Path) -> dict[str, tuple[int, int]]:
    """Valid [low, high) value ranges of integer inputs, so random token ids index real rows."""
    return value_ranges_of_model(onnx.load(str(model_path), load_external_data=False))


def max_input_bytes() -> int:
    return settings.MAX_INPUT_MB.get() * MB


def check_input_size(specs: list[dict], batch_size: int, symbolic_dims: dict[str, int]) -> None:
    """UserError when one feed (batch x dims x item size, all inputs) is over the input limit.

    Checked before any input array is allocated, with Python integers, so a symbolic dimension
    of 10^9 is refused in microseconds instead of taking the host's memory.
    """
    total = 0
    for spec in specs:
        shape = concrete_shape(spec["shape"], batch_size, symbolic_dims, spec["name"])
        itemsize = np.dtype(spec["dtype"]).itemsize if spec["dtype"] != "str" else 1
        total += math.prod(shape) * itemsize
        if total > max_input_bytes():
            raise UserError(
                f"Input {spec['name']!r} at shape {list(shape)} takes {total / MB:,.0f} MB, over "
                f"the input limit of {settings.MAX_INPUT_MB.get()} MB (OPTIBOARD_MAX_INPUT_MB); "
                "use a smaller batch size or smaller values for the symbolic dimensions."
            )


def random_inputs(
    specs: list[dict],
    batch_size: int,
    symbolic_dims: dict[str, int],
    count: int = 1,
    seed: int = 0,
    ranges: dict | None = None,
) -> list[dict[str, np.ndarray]]:
    """count feeds of random data: floats standard normal, ints within ranges, bools 50/50."""
    check_input_size(specs, batch_size, symbolic_dims)
    rng = np.random.default_rng(seed)
    ranges = ranges or {}
    shapes = {
        spec["name"]: concrete_shape(spec["shape"], batch_size, symbolic_dims, spec["name"])
        for spec in specs
    }
    feeds = []
    for _ in range(count):
        feed: dict[str, np.ndarray] = {}
        for spec in specs:
            name = spec["name"]
            dtype = np.dtype(spec["dtype"]) if spec["dtype"] != "str" else None
            shape = shapes[name]
            if dtype is None or dtype.kind not in "fiub":
                raise UserError(
                    f"Input {name!r} has type {spec['dtype']}, for which random data cannot be "
                    "made; only numeric and bool inputs are supported."
                )
            if dtype.kind == "f":
                feed[name] = rng.standard_normal(shape).astype(dtype)
            elif dtype.kind == "b":
                feed[name] = rng.integers(0, 2, shape).astype(bool)
            else:
                low, high = ranges.get(name, DEFAULT_INT_RANGE)
                feed[name] = rng.integers(low, high, shape).astype(dtype)
        feeds.append(feed)
    return feeds
