"""Calibration uploads: checked against the model, stored; bad ones store nothing."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from backend.errors import UserError
from backend.models import library
from backend.models.ingest import ingest_file
from backend.queue import calibration
from backend.specs import Precision, SweepSpec

INT8 = SweepSpec(precisions=(Precision.FP32, Precision.INT8_STATIC))


def _npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _calibration_files(model_id: int) -> list[str]:
    return [a.filename for a in library.list_artifacts(model_id) if a.kind == "calibration"]


def test_an_uploaded_npz_is_stored_and_named_in_the_sweep(data_dir: Path, mlp_path: Path) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    data = _npz(x=np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32))
    spec = calibration.with_calibration(INT8, model.id, data, "my-cal.npz", wanted=True)
    assert spec.calibration_sha256 is not None
    assert library.artifact_path(spec.calibration_sha256).read_bytes() == data
    assert _calibration_files(model.id) == ["my-cal.npz"]


def test_a_wrong_input_name_is_refused_and_nothing_is_stored(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    data = _npz(not_an_input=np.zeros((8, 16), np.float32))
    with pytest.raises(UserError):
        calibration.with_calibration(INT8, model.id, data, "cal.npz", wanted=True)
    assert _calibration_files(model.id) == []


def test_choosing_upload_without_a_file_says_what_to_do(data_dir: Path, mlp_path: Path) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    with pytest.raises(UserError, match="Upload the calibration .npz, or choose random inputs"):
        calibration.with_calibration(INT8, model.id, None, None, wanted=True)


def test_random_calibration_or_no_int8_static_leaves_the_sweep_as_it_is(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    data = _npz(x=np.zeros((8, 16), np.float32))
    assert calibration.with_calibration(INT8, model.id, data, "c.npz", wanted=False) == INT8
    fp32 = SweepSpec()
    assert calibration.with_calibration(fp32, model.id, data, "c.npz", wanted=True) == fp32
    assert _calibration_files(model.id) == []
