"""Model inputs: concrete shapes from symbolic ones, valid random feeds, calibration files.

Random float inputs are standard normal (mean 0, std 1), the range of normalised images and
activations that most exported models expect. Integer inputs that index an embedding table get
ids in [0, rows) of that table; other integer inputs get DEFAULT_INT_RANGE.
"""

from __future__ import annotations

import logging
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

import settings
from backend.errors import UserError

log = logging.getLogger(__name__)

MB = 1 << 20
RATIO_FLOOR = 16 * MB  # smaller arrays may compress as well as they like (masks, padding)
DEFAULT_INT_RANGE = (0, 2)  # [low, high): valid as an index into any table and as a 0/1 mask
# ops that pass integer ids through unchanged, so a Gather behind them still bounds the input
_ID_PASSTHROUGH_OPS = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"}

Dim = int | str | None


def _is_unknown(dim: Dim) -> bool:
    return dim is None or isinstance(dim, str) or (isinstance(dim, int) and dim <= 0)


def concrete_shape(
    shape: list[Dim], batch_size: int, symbolic_dims: dict[str, int], input_name: str
) -> tuple[int, ...]:
    """The shape to feed: a symbolic first dim is the batch, other names come from symbolic_dims."""
    result: list[int] = []
    for index, dim in enumerate(shape):
        if index == 0 and _is_unknown(dim):
            result.append(batch_size)
        elif index == 0:
            assert isinstance(dim, int)
            if batch_size != 1 and dim != batch_size:
                raise UserError(
                    f"Input {input_name!r} has a fixed batch of {dim}, so it cannot run at batch "
                    f"size {batch_size}; use batch size {dim} or 1, or export the model with a "
                    "dynamic batch axis."
                )
            result.append(dim)
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


@dataclass
class CalibrationSet:
    """Per-sample feeds (batch 1) read from a user's .npz, with notes on conversions made."""

    feeds: list[dict[str, np.ndarray]]
    notes: list[str] = field(default_factory=list)
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # optional arrays (eval labels)


def _castable(source: np.dtype, target: np.dtype) -> bool:
    """Same kind (float64 -> float32, int32 -> int64) or a safe cast; never float -> int."""
    if np.can_cast(source, target, casting="safe"):
        return True
    return source.kind == target.kind and source.kind in "fiu"


def _member_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple, np.dtype, int]:
    """(shape, dtype, header bytes) of one .npy member, read without loading its data."""
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(member)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(member)
        return tuple(shape), dtype, member.tell()


def check_npz_headers(path: Path, expected: list[str], optional: tuple[str, ...] = ()) -> None:
    """Refuse an .npz from its headers alone, before any array is loaded: object arrays, arrays
    whose declared size disagrees with the member, or declares far more than the file holds
    (OPTIBOARD_MAX_COMPRESSION_RATIO), or more than OPTIBOARD_MAX_INPUT_MB in all."""
    name = path.name
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise UserError(
            f"{name} is not a readable .npz file ({exc}); save it with numpy.savez({expected[0]}"
            "=array, ...)."
        ) from None
    ratio_cap = settings.MAX_COMPRESSION_RATIO.get()
    total = 0
    with archive:
        members = archive.infolist()
        keys = [m.filename.removesuffix(".npy") for m in members]
        if sorted(k for k in keys if k not in optional) != sorted(expected):
            also = f" (and optionally {', '.join(optional)})" if optional else ""
            raise UserError(
                f"{name} has arrays named {', '.join(keys[:20]) or 'nothing'}, but the model's "
                f"inputs are {', '.join(expected)}; use exactly those names as keys{also}."
            )
        for info, key in zip(members, keys, strict=True):
            try:
                shape, dtype, header = _member_header(archive, info)
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
                raise UserError(
                    f"Array {key!r} in {name} has no readable .npy header ({exc}); save it with "
                    "numpy.savez."
                ) from None
            if dtype.hasobject:
                raise UserError(
                    f"Array {key!r} in {name} is an object array, which is refused because it "
                    "would need unpickling; save plain numeric arrays."
                )
            declared = math.prod(shape) * dtype.itemsize
            total += declared
            if info.file_size != header + declared:
                raise UserError(
                    f"Array {key!r} in {name} declares shape {list(shape)} ({declared / MB:,.1f} "
                    f"MB) but holds {max(info.file_size - header, 0) / MB:,.1f} MB; the file is "
                    "damaged, save it again with numpy.savez."
                )
            if declared > RATIO_FLOOR and declared > ratio_cap * max(info.compress_size, 1):
                raise UserError(
                    f"Array {key!r} in {name} declares {declared / MB:,.1f} MB in "
                    f"{info.compress_size / MB:,.2f} MB of file, more than the compression "
                    f"limit of {ratio_cap:g}:1 allows; save real samples with numpy.savez."
                )
            if total > max_input_bytes():
                raise UserError(
                    f"{name} declares {total / MB:,.0f} MB of arrays, over the input limit of "
                    f"{settings.MAX_INPUT_MB.get()} MB (OPTIBOARD_MAX_INPUT_MB); use fewer samples."
                )


def _load_arrays(
    path: Path, expected: list[str], optional: tuple[str, ...] = ()
) -> dict[str, np.ndarray]:
    """The arrays of an .npz whose headers check_npz_headers has already accepted."""
    name = path.name
    try:
        archive = np.load(str(path), allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise UserError(
            f"{name} is not a readable .npz file ({exc}); save it with numpy.savez({expected[0]}"
            "=array, ...)."
        ) from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise UserError(
            f"{name} holds a single array, not an .npz archive; save it with numpy.savez with one "
            f"array per input named {', '.join(expected)}."
        )
    with archive:
        try:
            present = [key for key in optional if key in archive.files]
            return {key: archive[key] for key in [*expected, *present]}
        except ValueError as exc:  # numpy refuses object arrays without allow_pickle
            raise UserError(
                f"An array in {name} is an object array, which is refused because it would need "
                "unpickling; save plain numeric arrays."
            ) from exc


def _conform(
    array: np.ndarray, spec: dict, name: str, symbolic_dims: dict[str, int], notes: list[str]
) -> np.ndarray:
    """The array cast to the input's dtype, or UserError when its dtype, rank or dims do not fit."""
    key = spec["name"]
    target = np.dtype(spec["dtype"])
    if array.dtype != target:
        if not _castable(array.dtype, target):
            raise UserError(
                f"Array {key!r} in {name} has dtype {array.dtype}, but input {key!r} takes "
                f"{target}; save it as {target}."
            )
        notes.append(f"calibration array {key!r} cast from {array.dtype} to {target}")
        array = array.astype(target)
    rank = len(spec["shape"])
    if array.ndim != rank:
        raise UserError(
            f"Array {key!r} in {name} has {array.ndim} dimensions, but input {key!r} has "
            f"{rank}; the first axis holds the samples and the rest must match the input "
            f"shape {spec['shape'][1:]}."
        )
    for index, dim in enumerate(spec["shape"][1:], start=1):
        wanted = dim if isinstance(dim, int) and dim > 0 else symbolic_dims.get(str(dim))
        if wanted is not None and array.shape[index] != wanted:
            raise UserError(
                f"Array {key!r} in {name} has size {array.shape[index]} on axis {index}, but "
                f"the input needs {wanted} there (dimension {dim!r})."
            )
    return array


def read_calibration_npz(
    path: Path, specs: list[dict], symbolic_dims: dict[str, int], optional: tuple[str, ...] = ()
) -> CalibrationSet:
    """Check a calibration (or evaluation) .npz against the model inputs (headers first: nothing is
    loaded from a file that lies about its size), split it into batch-1 feeds; arrays named in
    `optional` (an evaluation set's labels) come back unchecked in extra."""
    path, name = Path(path), Path(path).name
    expected = [spec["name"] for spec in specs]
    check_npz_headers(path, expected, optional)
    loaded = _load_arrays(path, expected, optional)
    notes: list[str] = []
    arrays = {s["name"]: _conform(loaded[s["name"]], s, name, symbolic_dims, notes) for s in specs}
    counts = {array.shape[0] for array in arrays.values()}
    if len(counts) != 1:
        raise UserError(
            f"The arrays in {name} hold different numbers of samples ({sorted(counts)}); every "
            "input needs one entry per sample along the first axis."
        )
    samples = counts.pop()
    if samples == 0:
        raise UserError(f"{name} holds no samples; put at least one along the first axis.")
    _refuse_non_finite(arrays, name)
    feeds = [{key: arrays[key][i : i + 1] for key in expected} for i in range(samples)]
    for note in notes:
        log.info("%s: %s", name, note)
    extra = {key: loaded[key] for key in optional if key in loaded}
    return CalibrationSet(feeds, notes, extra)


def _refuse_non_finite(arrays: dict[str, np.ndarray], name: str) -> None:
    """NaN or inf in calibration data makes every scale garbage: say so, and where, up front."""
    for key, array in arrays.items():
        if array.dtype.kind in "fc" and (bad := array.size - int(np.isfinite(array).sum())):
            raise UserError(
                f"Input {key!r} in {name} holds {bad:,} NaN or infinite values (of {array.size:,});"
                " replace them with real samples."
            )


def load_calibration_npz(
    path: Path, specs: list[dict], symbolic_dims: dict[str, int]
) -> list[dict[str, np.ndarray]]:
    """Per-sample batch-1 feeds from a calibration .npz (never unpickled), checked against specs."""
    return read_calibration_npz(path, specs, symbolic_dims).feeds
