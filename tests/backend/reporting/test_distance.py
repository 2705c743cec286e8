"""Distance to the hardware and copy share, on results recorded on an H200 by bench/gpu_depth.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.models import cost
from backend.reporting import distance
from backend.results import ConfigurationResult
from backend.specs import Configuration, CudaOptions

RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results"


def recorded(name: str) -> list[ConfigurationResult]:
    rows = json.loads((RESULTS / f"h200_gpu_depth_{name}.json").read_text())
    return [ConfigurationResult.from_dict(row) for row in rows]


def by_label(results: list[ConfigurationResult]) -> dict[str, ConfigurationResult]:
    return {r.configuration.label: r for r in results}


def test_copy_share_pairs_end_to_end_with_device_resident_of_the_same_configuration() -> None:
    results = recorded("resnet50")
    shares = distance.copy_shares(results)
    labels = by_label(results)
    pairs = {
        "CUDA FP32 b1": "CUDA FP32 device-resident b1",
        "CUDA FP16 b1": "CUDA FP16 device-resident b1",
        "CUDA FP16 b512": "CUDA FP16 device-resident b512",
        "CUDA FP32 b512": "CUDA FP32 device-resident b512",
    }
    assert len(shares) == len(pairs)  # graphs, NHWC, no-TF32 rows have no end-to-end twin
    for end_to_end, device in pairs.items():
        e2e, dev = labels[end_to_end].latency.p50, labels[device].latency.p50
        key = distance.io_pair_key(labels[device].configuration)
        assert shares[key] == pytest.approx((e2e - dev) / e2e)
    assert shares[key] > 0.2  # at batch 512 the copies are a large share of end to end


def test_achieved_flops_and_fraction_of_the_peak_for_the_precision_that_ran() -> None:
    labels = by_label(recorded("resnet50"))
    fp16 = labels["CUDA FP16 device-resident b512"]
    found = distance.distance(fp16)
    assert found is not None and found.device == "NVIDIA H200" and found.precision == "fp16"
    assert found.achieved_flops == fp16.telemetry["flops_per_sample"] * fp16.throughput
    assert found.fraction == pytest.approx(found.achieved_flops / 989.4e12)
    assert distance.distance(labels["CUDA FP32 b1"]).precision == "tf32"
    assert distance.distance(labels["CUDA FP32 notf32 device-resident b1"]).precision == "fp32"


def test_executed_precision_and_peaks_by_nvml_name() -> None:
    int8 = Configuration(precision="int8_static", provider="cuda")
    no_tf32 = Configuration(precision="fp32", provider="cuda", cuda=CudaOptions(use_tf32=False))
    assert distance.executed_precision(int8) == "int8"
    assert distance.executed_precision(no_tf32) == "fp32"
    assert distance.executed_precision(Configuration(precision="fp32")) == "fp32"  # CPU
    assert distance.device_peak("NVIDIA H200", "fp16") == 989.4e12
    assert distance.device_peak("NVIDIA H200 NVL", "fp16") < 989.4e12
    assert distance.device_peak("NVIDIA GeForce RTX 4090", "fp16") is None


def test_the_mlperf_line_appears_for_resnet50_and_not_for_bert() -> None:
    resnet = recorded("resnet50")[0]
    bert = recorded("bert_base")[-1]
    assert resnet.telemetry["resnet50_like"] and not bert.telemetry["resnet50_like"]
    assert "94,600" in (distance.mlperf_line(resnet) or "")
    assert distance.mlperf_line(bert) is None
    assert cost.resnet50_like(8.2e9, 53, [1, 3, 224, 224])
    assert not cost.resnet50_like(8.2e9, 53, [1, 3, 299, 299])
    assert not cost.resnet50_like(1.8e9, 20, [1, 3, 224, 224])  # resnet18-sized
