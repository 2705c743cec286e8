from pathlib import Path

import numpy as np
import pytest

from backend.errors import UnavailableError
from backend.runtimes import all_provider_statuses, get_runtime
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, Precision


def test_every_registered_backend_says_what_it_can_run_here() -> None:
    statuses = all_provider_statuses()
    assert {"onnxruntime", "tensorrt", "openvino"} <= set(statuses)
    cpu = next(s for s in statuses["onnxruntime"] if s.name == "cpu")
    assert cpu.available
    for backend in statuses.values():
        for status in backend:
            assert status.available or status.reason  # never unavailable without a reason


def test_unavailable_provider_is_an_error_that_says_why() -> None:
    backend = get_runtime("onnxruntime")
    missing = [s for s in backend.providers() if not s.available]
    if not missing:
        pytest.skip("every ONNX Runtime provider works on this machine")
    with pytest.raises(UnavailableError, match=missing[0].reason[:30]):
        backend.open(
            Path("x.onnx"), SessionOptions(Configuration(Precision.FP32, provider=missing[0].name))
        )


def test_unknown_backend_lists_the_registered_ones() -> None:
    with pytest.raises(UnavailableError, match="registered runtimes: onnxruntime"):
        get_runtime("coreml")


def test_runner_records_the_providers_the_session_really_got(mlp_path: Path) -> None:
    backend = get_runtime("onnxruntime")
    with backend.open(mlp_path, SessionOptions(Configuration(Precision.FP32))) as runner:
        assert runner.providers_used == ["CPUExecutionProvider"]
        assert runner.session_create_ms > 0
        assert runner.input_specs() == [{"name": "x", "dtype": "float32", "shape": ["N", 16]}]
        (probs,) = runner.infer({"x": np.ones((3, 16), np.float32)})
    assert probs.shape == (3, 10) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)
