"""The CUDA provider on the real tritonserver: on a host without a GPU, or with an ONNX Runtime
that has no CUDA, the model does not load and the sentence says why (never a CPU fallback)."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from backend.errors import UnavailableError
from backend.serving.export import parse_config
from backend.serving.repository import plan_model, write_repository
from backend.serving.server import TritonEnvironment, TritonServer, serve
from backend.serving.study import ServedVariant, ServingStudy
from backend.serving.types import LoadSpec, Scenario, ServingProvider
from tests.backend.serving.conftest import POLICY


def test_cuda_on_a_host_without_a_gpu_is_unavailable_with_tritons_line(
    triton_environment: TritonEnvironment, mlp_path: Path
) -> None:
    with (
        pytest.raises(UnavailableError) as caught,
        serve(mlp_path, POLICY, environment=triton_environment, provider=ServingProvider.CUDA),
    ):
        pass
    message = str(caught.value)
    assert message.startswith("Triton could not serve the model")
    assert "failed to load 'model'" in message and "gpu id 0" in message
    assert message.endswith("onnxruntime-gpu in the serving environment, else serve on the CPU.")


def test_the_model_refuses_an_onnx_runtime_without_cuda(
    triton_environment: TritonEnvironment, mlp_path: Path, tmp_path: Path
) -> None:
    """The model's own check, reached by serving the CUDA configuration on CPU instances: the
    local ONNX Runtime (a CPU build) lacks CUDAExecutionProvider: the load fails, no fallback."""
    served = plan_model(mlp_path, POLICY, intra_op_threads=1, provider=ServingProvider.CUDA)
    repository = write_repository(tmp_path / "models", mlp_path, served)
    config = repository / "model/config.pbtxt"
    parsed = parse_config(config.read_text())
    (group,) = parsed.instance_group
    assert (group.kind, list(group.gpus)) == (group.KIND_GPU, [0])
    group.kind = group.KIND_CPU
    del group.gpus[:]
    config.write_text(text_format.MessageToString(parsed))
    server = TritonServer(triton_environment, served, tmp_path)
    with pytest.raises(UnavailableError) as caught:
        server.start(repository, timeout_s=60)
    message = str(caught.value)
    assert "failed to load 'model'" in message
    assert "CUDA was asked for but this ONNX Runtime" in message
    assert "install onnxruntime-gpu" in message and server.session_providers == ()


def test_a_study_keeps_its_provider() -> None:
    study = ServingStudy(
        variants=(ServedVariant(),),
        policies=(POLICY,),
        loads=(LoadSpec(Scenario.CONCURRENCY, concurrency=2),),
        slo_p99_ms=10,
        provider=ServingProvider.CUDA,
    )
    assert ServingStudy.from_dict(study.to_dict()).provider is ServingProvider.CUDA
    legacy = {k: v for k, v in study.to_dict().items() if k != "provider"}
    assert ServingStudy.from_dict(legacy).provider is ServingProvider.CPU
