"""Calibration and evaluation data uploaded with a sweep: checked against the model, stored,
named in the spec.

The page hands over the uploaded bytes and nothing else; the file is written to a private temp
folder here, checked and stored by jobs.store_calibration / store_evaluation, and the folder
removed again. The two sets are kept apart: the same file is refused as both.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path

from backend.errors import UserError
from backend.launch.folders import owned_folder
from backend.queue import jobs
from backend.specs import Precision, SweepSpec


def store_calibration_upload(
    model_id: int, data: bytes, filename: str, symbolic_dims: dict[str, int] | None = None
) -> str:
    """Check an uploaded .npz against the model's inputs, store it and return its sha256."""
    return _store_upload(model_id, data, filename, symbolic_dims, jobs.store_calibration)


def store_evaluation_upload(
    model_id: int,
    data: bytes,
    filename: str,
    symbolic_dims: dict[str, int] | None = None,
    calibration_sha256: str | None = None,
) -> str:
    """Check an uploaded evaluation .npz (inputs, optional labels), store it, return its sha256;
    the sweep's calibration file is refused as its evaluation set."""

    def store(model: int, path: Path, name: str, dims: dict[str, int] | None) -> str:
        return jobs.store_evaluation(model, path, name, dims, calibration_sha256)

    return _store_upload(model_id, data, filename, symbolic_dims, store)


def _store_upload(
    model_id: int,
    data: bytes,
    filename: str,
    symbolic_dims: dict[str, int] | None,
    store: Callable[[int, Path, str, dict[str, int] | None], str],
) -> str:
    if not data:
        raise UserError(f"{Path(filename).name} is empty; upload a .npz with one array per input.")
    with owned_folder("upload") as tmp:
        # under the user's own name (made safe), so a refusal names the file they chose
        path = tmp / (re.sub(r"[^A-Za-z0-9._-]", "_", Path(filename).name) or "upload.npz")
        path.write_bytes(data)
        return store(model_id, path, Path(filename).name, symbolic_dims)


def with_calibration(
    spec: SweepSpec, model_id: int, data: bytes | None, filename: str | None, wanted: bool
) -> SweepSpec:
    """The sweep with its uploaded calibration file attached, when INT8 static asked for one.

    wanted: the user chose "upload a .npz" rather than random calibration inputs.
    """
    if not wanted or Precision.INT8_STATIC not in spec.precisions:
        return spec
    if data is None or filename is None:
        raise UserError("Upload the calibration .npz, or choose random inputs.")
    sha = store_calibration_upload(model_id, data, filename, dict(spec.symbolic_dims))
    return dataclasses.replace(spec, calibration_sha256=sha)


def with_evaluation(
    spec: SweepSpec,
    model_id: int,
    data: bytes | None,
    filename: str | None,
    wanted: bool = True,
) -> SweepSpec:
    """The sweep with its uploaded evaluation set attached, when the user chose to upload one.

    The same bytes as the calibration file are refused before anything is stored.
    """
    if not wanted:
        return spec
    if data is None or filename is None:
        raise UserError("Upload the evaluation .npz, or choose no evaluation set.")
    sha = store_evaluation_upload(
        model_id, data, filename, dict(spec.symbolic_dims), spec.calibration_sha256
    )
    return dataclasses.replace(spec, evaluation_sha256=sha)
