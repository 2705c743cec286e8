"""One real Triton server for the serving tests (session-scoped: it starts once)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.errors import UnavailableError
from backend.serving.server import TritonEnvironment, TritonServer, find_environment, serve
from backend.serving.types import BatchingPolicy
from tests import models as model_factory

# A queue delay long enough that requests in flight together reach the batcher together.
POLICY = BatchingPolicy(max_batch_size=16, max_queue_delay_us=5000)


@pytest.fixture(scope="session")
def triton_environment() -> TritonEnvironment:
    """The installed serving environment; missing, the tests fail (scripts/test installs it)."""
    try:
        return find_environment()
    except UnavailableError as exc:
        pytest.fail(f"{exc} The serving tests need it: scripts/test runs scripts/setup-triton.")


@pytest.fixture(scope="session")
def session_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("serving")
    return model_factory.save(model_factory.make_mlp(), folder / "mlp.onnx")


@pytest.fixture(scope="session")
def server(triton_environment: TritonEnvironment, session_model: Path) -> Iterator[TritonServer]:
    with serve(session_model, POLICY, environment=triton_environment) as running:
        yield running
