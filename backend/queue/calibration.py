"""Calibration data uploaded with a sweep: checked against the model, stored, named in the spec.

The page hands over the uploaded bytes and nothing else; the file is written to a private temp
folder here, checked and stored by jobs.store_calibration, and the folder removed again.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from backend.errors import UserError
from backend.queue import jobs
from backend.specs import Precision, SweepSpec


def store_calibration_upload(
    model_id: int, data: bytes, filename: str, symbolic_dims: dict[str, int] | None = None
) -> str:
    """Check an uploaded .npz against the model's inputs, store it and return its sha256."""
    if not data:
        raise UserError(f"{Path(filename).name} is empty; upload a .npz with one array per input.")
    with tempfile.TemporaryDirectory(prefix="optiboard-calibration-") as tmp:
        path = Path(tmp) / "calibration.npz"
        path.write_bytes(data)
        return jobs.store_calibration(model_id, path, Path(filename).name, symbolic_dims)


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
