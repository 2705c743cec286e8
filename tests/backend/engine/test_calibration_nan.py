"""The worker's side of NaN calibration data: the configuration fails naming input and count."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from backend.engine.run import ConfigurationTask, run_configuration
from backend.specs import MEASURE_PRESETS, Configuration
from tests import models


def test_a_stored_nan_calibration_file_fails_its_configuration_with_the_reason(
    tmp_path: Path,
) -> None:
    """A file stored before uploads were checked still reaches the worker: it says NaN there."""
    path = models.save(models.make_mlp(), tmp_path / "mlp.onnx")
    x = np.full((8, 16), np.nan, np.float32)  # every value NaN
    np.savez(tmp_path / "calib.npz", x=x)
    config = Configuration(precision="int8_static")
    task = ConfigurationTask(
        str(path),
        config,
        MEASURE_PRESETS["quick"],
        str(tmp_path / "out"),
        calibration_path=str(tmp_path / "calib.npz"),
    )
    result = run_configuration(task)
    assert result.status == "failed" and result.error is not None
    assert "Input 'x' in calib.npz holds 128 NaN or infinite values (of 128)" in result.error
