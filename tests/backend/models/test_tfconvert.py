"""TensorFlow SavedModel conversion with real TensorFlow and tf2onnx, run in a child process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from backend.errors import UserError
from backend.models.tfconvert import ConversionFailed, convert_savedmodel
from tests import models, tf_models, tfchild


@pytest.fixture(scope="module")
def dense_savedmodel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.save_dense_savedmodel(tmp_path_factory.mktemp("tf") / "dense")


def test_tensorflow_conversion_uses_the_chosen_opset_and_matches_tensorflow(
    dense_savedmodel: Path, tmp_path: Path
) -> None:
    done = convert_savedmodel(dense_savedmodel, tmp_path / "dense.onnx", opset=13)

    assert done.signature == "serving_default"
    assert done.opset == 13
    assert done.onnx_path == tmp_path / "dense.onnx"
    assert done.tf2onnx_version == "1.17.0"
    assert "converting signature 'serving_default' at opset 13" in done.log
    assert "Successfully converted TensorFlow model" in done.log
    model = onnx.load(str(done.onnx_path))
    assert {o.domain: o.version for o in model.opset_import}[""] == 13
    x = np.random.default_rng(3).normal(size=(4, 8)).astype(np.float32)
    session = ort.InferenceSession(str(done.onnx_path), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    want = tfchild.in_child(tf_models.serving_output, dense_savedmodel, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_tensorflow_conversion_is_stopped_at_the_configured_timeout(
    dense_savedmodel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_CONVERT_TIMEOUT_S", "0.5")

    with pytest.raises(ConversionFailed, match="took longer than 0.5 s and was stopped"):
        convert_savedmodel(dense_savedmodel, tmp_path / "slow.onnx")
    assert not (tmp_path / "slow.onnx").exists()


def test_tensorflow_savedmodel_with_several_signatures_lists_them(tmp_path: Path) -> None:
    tfchild.in_child(tf_models.save_two_signature_savedmodel, tmp_path / "two")

    with pytest.raises(ConversionFailed, match=r"several signatures \('double', 'halve'\)") as err:
        convert_savedmodel(tmp_path / "two", tmp_path / "two.onnx")
    assert "Traceback" not in str(err.value)
    assert not (tmp_path / "two.onnx").exists()


def test_damaged_savedmodel_reports_that_tensorflow_cannot_load_it(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"\x01\x02 not a saved model")

    with pytest.raises(ConversionFailed, match="TensorFlow could not load the SavedModel") as err:
        convert_savedmodel(broken, tmp_path / "broken.onnx")
    assert err.value.log  # the child's traceback is kept for the conversion log


def test_opset_outside_the_converter_range_is_refused_up_front(
    dense_savedmodel: Path, tmp_path: Path
) -> None:
    with pytest.raises(UserError, match="Opset 25 is outside what tf2onnx can produce"):
        convert_savedmodel(dense_savedmodel, tmp_path / "x.onnx", opset=25)
