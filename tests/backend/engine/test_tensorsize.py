"""Configurations whose tensors pass 2^31 elements are refused before a GPU session opens (on an
H200 they failed mid-run with "CUDNN failure 3000" and a traceback), and a configuration that
fails inside the runtime stores one line, never a Python traceback."""

from __future__ import annotations

import tempfile
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from backend.engine import run
from backend.engine.run import ConfigurationTask
from backend.engine.tensorsize import check_gpu_tensor_sizes
from backend.errors import UserError
from backend.jobs.measuring import measure_in_child
from backend.results import ConfigurationResult, ResultStatus
from backend.specs import MEASURE_PRESETS, Configuration, MeasureSettings
from tests import models


def test_an_intermediate_tensor_past_2_31_elements_is_refused_with_the_batch_that_fits(
    tmp_path: Path,
) -> None:
    """make_cnn's stem is 32 x 32 x 32 = 32,768 elements a sample: 65,536 samples are 2^31."""
    path = models.save(models.make_cnn(), tmp_path / "cnn.onnx")
    check_gpu_tensor_sizes(path, 65_535, {}, "cuda")

    with pytest.raises(UserError) as refused:
        check_gpu_tensor_sizes(path, 65_536, {}, "cuda")

    assert str(refused.value) == (
        "At batch 65536 the tensor 'stem' would hold 2,147,483,648 elements (shape "
        "[65536, 32, 32, 32]), past the 2^31 = 2,147,483,648 that cuDNN and CUDA kernels can "
        "index on the cuda provider; pick a batch of at most 65,535."
    )


def test_an_input_past_2_31_elements_is_named_first(tmp_path: Path) -> None:
    path = models.save(models.make_symbolic_dim_model(), tmp_path / "symbolic.onnx")
    with pytest.raises(UserError, match=r"the input 'x' would hold 2,147,483,648 elements"):
        check_gpu_tensor_sizes(path, 2, {"seq": 2**30}, "tensorrt")


def test_a_gpu_configuration_is_refused_before_its_variant_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through run._build, the step before any session: nothing is built or allocated."""
    monkeypatch.setenv("OPTIBOARD_MAX_INPUT_MB", "100000")  # the input (805 MB) is not the issue
    path = models.save(models.make_cnn(), tmp_path / "cnn.onnx")
    config = Configuration(precision="fp32", provider="cuda", batch_size=65_536)
    task = ConfigurationTask(str(path), config, MeasureSettings(), str(tmp_path / "out"))
    result = ConfigurationResult(config.key, config, ResultStatus.FAILED)
    workdir = Path(tempfile.mkdtemp(dir=tmp_path))

    with pytest.raises(UserError, match="2,147,483,648 elements"):
        run._build(task, config, workdir, result)
    assert list(workdir.iterdir()) == []


def _fails_at_run_time(path: Path) -> Path:
    """Reshape to a constant [2, 8]: loads and builds, and fails inside ORT at batch 4."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 8])
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "bad_reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_runtime_failure_is_stored_as_one_line_without_a_traceback(tmp_path: Path) -> None:
    path = _fails_at_run_time(tmp_path / "bad.onnx")
    config = Configuration(precision="fp32", batch_size=4)
    task = ConfigurationTask(str(path), config, MEASURE_PRESETS["quick"], str(tmp_path / "out"))

    result = measure_in_child(task, timeout_s=120)

    assert result is not None and result.status == ResultStatus.FAILED
    error = result.error or ""
    assert "Traceback" not in error and "\n" not in error, error
    assert error.startswith("The runtime failed: ") and "requested shape:{2,8}" in error, error
    assert ".h:" not in error  # no C++ source positions either
