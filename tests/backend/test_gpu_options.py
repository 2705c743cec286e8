"""CUDA provider options and timing modes on Configuration and SweepSpec: refusals, keys, JSON."""

from __future__ import annotations

import pytest

from backend.errors import UserError
from backend.specs import Configuration, CudaOptions, IoMode, SweepSpec

GRAPHS = CudaOptions(enable_cuda_graph=True)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"cuda": GRAPHS}, "device-resident"),
        ({"cuda": GRAPHS, "io_mode": "device", "fixed_shapes": False}, "fixed shapes"),
        ({"provider": "cpu", "cuda": CudaOptions(use_tf32=False)}, "cuda provider only"),
        ({"provider": "cpu", "cuda": CudaOptions(fuse_conv_bias=True)}, "cuda provider only"),
        ({"provider": "tensorrt", "cuda": {"conv_max_workspace": False}}, "cuda provider only"),
        ({"cuda": CudaOptions(fuse_conv_bias=True)}, "needs prefer_nhwc"),
        ({"backend": "openvino", "cuda": CudaOptions(prefer_nhwc=True)}, "cuda provider only"),
        ({"precision": "fp32", "cuda": CudaOptions(float16_io=True)}, "FP16 only"),
        ({"provider": "cpu", "io_mode": "device"}, "GPU provider"),
        ({"cuda": {"conv_algo_search": "FASTEST"}}, "EXHAUSTIVE, HEURISTIC, DEFAULT"),
    ],
)
def test_impossible_combinations_are_refused_with_the_reason(kwargs: dict, words: str) -> None:
    base = {"precision": "fp16", "provider": "cuda"}
    with pytest.raises(UserError, match=words) as caught:
        Configuration(**(base | kwargs))
    assert str(caught.value).count(".") <= 2  # one sentence (plus at most a decimal point)


def test_defaults_keep_old_keys_and_every_knob_is_in_the_key_and_the_json() -> None:
    plain = Configuration(precision="fp16", provider="cuda", batch_size=8)
    assert plain.key == "onnxruntime/cuda/fp16/b8/fixed/all/t0"
    tuned = Configuration(
        precision="fp16",
        provider="cuda",
        batch_size=8,
        io_mode=IoMode.DEVICE,
        cuda=CudaOptions(
            conv_algo_search="HEURISTIC",
            use_tf32=False,
            prefer_nhwc=True,
            enable_cuda_graph=True,
            float16_io=True,
            conv_max_workspace=False,
            fuse_conv_bias=True,
        ),
    )
    assert tuned.key.endswith("/conv:heuristic/notf32/nhwc/cudagraph/f16io/smallws/fusebias")
    assert "device-resident" in tuned.label and "cudagraph" in tuned.label
    again = Configuration.from_dict(tuned.to_dict())
    assert again == tuned and again.cuda.conv_algo_search == "HEURISTIC"
    assert again.cuda.fuse_conv_bias and not again.cuda.conv_max_workspace
    fp32 = Configuration(precision="fp32", provider="cuda", cuda=CudaOptions(fuse_conv_bias=True))
    assert fp32.key.endswith("/fusebias")  # FP32 NCHW with bias fusion ran on the H200
    assert Configuration.from_dict({k: v for k, v in plain.to_dict().items() if k != "cuda"})


def test_sweep_times_gpu_points_both_ways_and_applies_cuda_knobs_where_they_hold() -> None:
    spec = SweepSpec(
        precisions=("fp32", "fp16"),
        providers=("cpu", "cuda"),
        io_modes=("end_to_end", "device"),
        cuda=CudaOptions(enable_cuda_graph=True, float16_io=True),
    )
    configs = spec.configurations()
    cpu = [c for c in configs if c.provider == "cpu"]
    assert {c.io_mode for c in cpu} == {IoMode.END_TO_END} and len(cpu) == 2
    cuda = [c for c in configs if c.provider == "cuda"]
    assert len(cuda) == 4
    for config in cuda:
        assert config.cuda.enable_cuda_graph == (config.io_mode == IoMode.DEVICE)
        assert config.cuda.float16_io == (config.precision == "fp16")
    assert SweepSpec.from_dict(spec.to_dict()) == spec


def test_a_knee_sweep_doubles_the_batch_up_to_its_ceiling() -> None:
    spec = SweepSpec(providers=("cuda",), find_knee=True, knee_max_batch=64)
    assert spec.batch_sizes == (1, 2, 4, 8, 16, 32, 64)
    with pytest.raises(UserError, match="at least 1"):
        SweepSpec(find_knee=True, knee_max_batch=0)
