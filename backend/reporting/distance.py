"""How far a GPU result is from the hardware: achieved FLOP/s against the device's peak for the
precision it ran, the copy share between end-to-end and device-resident timings, and the MLPerf
ResNet-50 figure as a reference line for ResNet-50-like models.

Peaks are the vendor's dense Tensor Core figures (half of the datasheet's "with sparsity" ones):
NVIDIA H200 datasheet, nvidia.com/en-us/data-center/h200 (SXM: FP32 67 TFLOPS, TF32 989, FP16/BF16
1,979, INT8 3,958 TOPS, each with sparsity); the H100 SXM has the same compute (Hopper GH100 at
the same clocks; table in glennklockwood.com/garden/processors/h100: TF32 494.7, FP16 989.4, INT8
1978.9 dense). The device is matched by its NVML name.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.cudaoptions import IoMode
from backend.results import ConfigurationResult
from backend.specs import Configuration, Precision

# NVML name fragment -> dense peak in FLOP/s (OP/s for INT8) per executed precision
PEAKS: dict[str, dict[str, float]] = {
    "H200 NVL": {"fp32": 60e12, "tf32": 417.5e12, "fp16": 835.5e12, "int8": 1670.5e12},
    "H200": {"fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "int8": 1978.9e12},
    "H100 80GB HBM3": {"fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "int8": 1978.9e12},
}

# MLPerf Inference (closed, data center) ResNet-50 v1.5 offline, NVIDIA's 8x H200 submission with
# TensorRT INT8: about 757,000 samples/s per system, ~94,600 per GPU (the figure issue 14 quotes)
MLPERF_RESNET50_H200 = 94_600.0


def executed_precision(config: Configuration) -> str:
    """The arithmetic the device really runs: FP32 on CUDA uses TF32 Tensor Cores unless off."""
    if config.precision.is_int8:
        return "int8"
    if config.precision in (Precision.FP16, Precision.BF16):
        return "fp16"
    if config.provider == "cuda" and config.cuda.use_tf32:
        return "tf32"
    return "fp32"


def device_peak(gpu_name: str, precision: str) -> float | None:
    """The dense peak of the first table entry whose name occurs in the NVML name."""
    for fragment, peaks in PEAKS.items():
        if fragment.lower() in gpu_name.lower():
            return peaks.get(precision)
    return None


@dataclass(frozen=True)
class Distance:
    """Achieved FLOP/s of one result and its share of the device's peak for that precision."""

    achieved_flops: float
    precision: str
    peak_flops: float | None
    device: str

    @property
    def fraction(self) -> float | None:
        return self.achieved_flops / self.peak_flops if self.peak_flops else None


def _gpu_name(result: ConfigurationResult) -> str:
    gpus = result.environment.get("gpus") or []
    return str(gpus[0].get("name", "")) if gpus else ""


def distance(result: ConfigurationResult) -> Distance | None:
    """None unless the result ran on a GPU provider with a throughput and a static FLOP count."""
    config = result.configuration
    flops = result.telemetry.get("flops_per_sample")
    if config.provider not in ("cuda", "tensorrt") or not flops or not result.throughput:
        return None
    precision = executed_precision(config)
    gpu = _gpu_name(result)
    return Distance(flops * result.throughput, precision, device_peak(gpu, precision), gpu)


def io_pair_key(config: Configuration) -> str:
    """The key two results share when they differ only in what the timing includes."""
    return config.key.replace(f"/{IoMode.DEVICE.value}", "")


def copy_shares(results: list[ConfigurationResult]) -> dict[str, float]:
    """(end-to-end p50 - device-resident p50) / end-to-end p50, per pair of the same config.

    Keyed by io_pair_key; only pairs where both results measured a latency appear.
    """
    end_to_end: dict[str, float] = {}
    device: dict[str, float] = {}
    for result in results:
        if not result.ok or result.latency is None:
            continue
        config = result.configuration
        side = device if config.io_mode == IoMode.DEVICE else end_to_end
        side[io_pair_key(config)] = result.latency.p50
    return {
        key: (end_to_end[key] - device[key]) / end_to_end[key]
        for key in end_to_end.keys() & device.keys()
        if end_to_end[key] > 0
    }


def mlperf_line(result: ConfigurationResult) -> str | None:
    """The MLPerf reference sentence for a ResNet-50-like GPU result, else None."""
    if not result.telemetry.get("resnet50_like") or not result.throughput:
        return None
    share = result.throughput / MLPERF_RESNET50_H200
    return (
        f"MLPerf reference (ResNet-50 offline, H200, TensorRT INT8): ~{MLPERF_RESNET50_H200:,.0f} "
        f"samples/s per GPU; this result is {share:.1%} of it."
    )
