"""Feeds from a user's .npz (a calibration or evaluation set), checked against the model's inputs.

The file is untrusted: its headers are read and checked before any array is loaded (sizes that
lie, compression bombs, object arrays that would need unpickling), and the arrays are never
unpickled. Split into batch-1 feeds, one per sample.
"""

from __future__ import annotations

import logging
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import settings
from backend.engine.inputs import MB, max_input_bytes
from backend.errors import UserError

log = logging.getLogger(__name__)

RATIO_FLOOR = 16 * MB  # smaller arrays may compress as well as they like (masks, padding)


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
    """Refuse an .npz from its headers alone, before any array is loaded: other names than the
    model's inputs, then check_npz_arrays."""
    name = path.name
    with _open_npz(path, f"numpy.savez({expected[0]}=array, ...)") as archive:
        keys = [m.filename.removesuffix(".npy") for m in archive.infolist()]
        if sorted(k for k in keys if k not in optional) != sorted(expected):
            also = f" (and optionally {', '.join(optional)})" if optional else ""
            raise UserError(
                f"{name} has arrays named {', '.join(keys[:20]) or 'nothing'}, but the model's "
                f"inputs are {', '.join(expected)}; use exactly those names as keys{also}."
            )
        _check_arrays(archive, name)


def check_npz_arrays(path: Path) -> None:
    """Refuse an .npz whose headers lie, before any array is loaded: object arrays, arrays
    whose declared size disagrees with the member, or declares far more than the file holds
    (OPTIBOARD_MAX_COMPRESSION_RATIO), or more than OPTIBOARD_MAX_INPUT_MB in all. For an .npz
    a child wrote (a regression side's outputs) as much as for an upload."""
    with _open_npz(Path(path), "numpy.savez") as archive:
        _check_arrays(archive, Path(path).name)


def _open_npz(path: Path, how: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise UserError(
            f"{path.name} is not a readable .npz file ({exc}); save it with {how}."
        ) from None


def _check_arrays(archive: zipfile.ZipFile, name: str) -> None:
    ratio_cap = settings.MAX_COMPRESSION_RATIO.get()
    total = 0
    for info in archive.infolist():
        key = info.filename.removesuffix(".npy")
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
