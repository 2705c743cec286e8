"""The model repository's config.pbtxt, checked by Triton's own model_config protobuf."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from backend.errors import UserError
from backend.serving.repository import ServedModel, config_text, plan_model
from backend.serving.types import BatchingPolicy, ServingProvider
from tests import models as model_factory


def _parsed(served: ServedModel) -> model_config_pb2.ModelConfig:
    return text_format.Parse(config_text(served), model_config_pb2.ModelConfig())


def test_config_carries_the_whole_batching_policy(mlp_path: Path) -> None:
    policy = BatchingPolicy(
        max_batch_size=32,
        preferred_batch_sizes=(8, 16),
        max_queue_delay_us=1500,
        instance_count=2,
        preserve_ordering=True,
    )
    config = _parsed(plan_model(mlp_path, policy))
    assert config.backend == "python" and config.max_batch_size == 32
    assert list(config.dynamic_batching.preferred_batch_size) == [8, 16]
    assert config.dynamic_batching.max_queue_delay_microseconds == 1500
    assert config.dynamic_batching.preserve_ordering
    group = config.instance_group[0]
    assert group.count == 2 and group.kind == model_config_pb2.ModelInstanceGroup.KIND_CPU
    assert [(t.name, list(t.dims)) for t in config.input] == [("x", [16])]
    assert [(t.name, list(t.dims)) for t in config.output] == [("probs", [10])]
    # ONNX Runtime's threads per instance are recorded in the config the stub reads
    assert int(config.parameters["intra_op_threads"].string_value) >= 1
    assert config.parameters["provider"].string_value == "cpu"


def test_cuda_provider_puts_the_instances_on_gpu_zero(mlp_path: Path) -> None:
    policy = BatchingPolicy(max_batch_size=8, instance_count=2)
    config = _parsed(plan_model(mlp_path, policy, provider=ServingProvider.CUDA))
    group = config.instance_group[0]
    assert group.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU
    assert list(group.gpus) == [0] and group.count == 2
    assert config.parameters["provider"].string_value == "cuda"
    assert config.parameters["cudnn_conv_algo_search"].string_value == "HEURISTIC"


def test_without_dynamic_batching_the_config_has_no_batcher(mlp_path: Path) -> None:
    policy = BatchingPolicy(max_batch_size=8, dynamic_batching=False)
    config = _parsed(plan_model(mlp_path, policy, intra_op_threads=3))
    assert config.max_batch_size == 8 and not config.HasField("dynamic_batching")
    assert config.parameters["intra_op_threads"].string_value == "3"


def test_named_dimension_needs_a_size(tmp_path: Path) -> None:
    path = model_factory.save(model_factory.make_symbolic_dim_model(), tmp_path / "sym.onnx")
    with pytest.raises(UserError, match="--dim seq=SIZE"):
        plan_model(path, BatchingPolicy(max_batch_size=4))
    config = _parsed(plan_model(path, BatchingPolicy(max_batch_size=4), dims={"seq": 12}))
    assert list(config.input[0].dims) == [12]
