"""The physical limit of decoding: a device's peak memory bandwidth, and how much of it a
measured inter-token latency achieved (bytes read per step / seconds per step)."""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

import settings
from backend.hardware import nvml

# Datasheet peaks (bytes/s) where NVML's bus width x clock is not readable; matched on the name.
GPU_SPEC_BYTES_S = {
    "H200": 4.8e12,  # HBM3e
    "H100 SXM": 3.35e12,
    "H100 PCIe": 2.0e12,
    "H100": 3.35e12,
    "A100-SXM4-80GB": 2.039e12,
    "A100": 1.555e12,
    "L40S": 0.864e12,
    "L4": 0.3e12,
}
COPY_MB = 256  # the CPU copy's buffer: far beyond any last-level cache
COPY_REPEATS = 5


@dataclass(frozen=True)
class PeakBandwidth:
    """A device's peak bandwidth and where the number came from (a sentence)."""

    device: str
    bytes_per_s: float
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Roofline:
    """Achieved bandwidth of a decode: bytes per step / inter-token latency."""

    bytes_per_step: float
    itl_ms: float
    achieved_bytes_s: float
    peak: PeakBandwidth

    @property
    def fraction(self) -> float:
        return self.achieved_bytes_s / self.peak.bytes_per_s if self.peak.bytes_per_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fraction": self.fraction}


def roofline(bytes_per_step: float, itl_ms: float, peak: PeakBandwidth) -> Roofline:
    achieved = bytes_per_step / (itl_ms / 1e3) if itl_ms > 0 else 0.0
    return Roofline(bytes_per_step, itl_ms, achieved, peak)


def gpu_peak(index: int = 0) -> PeakBandwidth | None:
    """NVML's memory bus width x max memory clock x 2 (double data rate); else the datasheet
    figure for the GPU's name; None without NVML."""
    with nvml() as nv:
        if nv is None:
            return None
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        name = nv.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else str(name)
        for key, value in GPU_SPEC_BYTES_S.items():
            if key in name:
                return PeakBandwidth(name, value, f"{name} datasheet: {value / 1e12:.2f} TB/s")
        try:
            bus_bits = nv.nvmlDeviceGetMemoryBusWidth(handle)
            clock_mhz = nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_MEM)
        except Exception as exc:  # NVML raises its own error types per missing query
            return PeakBandwidth(name, 0.0, f"NVML cannot read {name}'s memory bus ({exc})")
        value = bus_bits / 8 * clock_mhz * 1e6 * 2
        return PeakBandwidth(
            name, value, f"NVML: {bus_bits}-bit bus x {clock_mhz} MHz x 2 = {value / 1e12:.2f} TB/s"
        )


def _cache_file() -> Path:
    return settings.data_dir() / "cache" / f"copy-bandwidth-{platform.node() or 'host'}.json"


def measure_copy_bandwidth(megabytes: int = COPY_MB, repeats: int = COPY_REPEATS) -> float:
    """Best of `repeats` numpy copies of a buffer: bytes read + written per second."""
    source = np.ones(megabytes << 18, dtype=np.float32)  # megabytes MiB
    target = np.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best


def cpu_peak() -> PeakBandwidth:
    """This host's copy bandwidth: measured again on every call (under a second) and the best
    ever seen kept per host in the data folder, since a copy measured while other processes
    share the memory bus reads low (a CPU has no NVML; its datasheet peak is rarely reachable
    by one process)."""
    from backend.host import describe_environment

    cpu = describe_environment()["cpu"]
    path = _cache_file()
    best, runs = 0.0, 0
    if path.is_file():
        try:
            cached = json.loads(path.read_text())
            if cached.get("cpu") == cpu:
                best, runs = float(cached["bytes_per_s"]), int(cached["runs"])
        except (ValueError, KeyError, TypeError):
            pass  # a damaged cache file starts over
    best, runs = max(best, measure_copy_bandwidth()), runs + 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cpu": cpu, "bytes_per_s": best, "runs": runs}))
    return PeakBandwidth(
        cpu,
        best,
        f"numpy copy of {COPY_MB} MiB on this host, the best of {runs} measurement"
        f"{'s' if runs > 1 else ''} of {COPY_REPEATS} copies: {best / 1e9:.1f} GB/s "
        "(read + write)",
    )


def device_peak(device: str) -> PeakBandwidth:
    """The peak a decode on `device` ("cpu", "cuda", "gpu") is compared with."""
    if device == "cpu":
        return cpu_peak()
    peak = gpu_peak()
    if peak is None:
        return PeakBandwidth(device, 0.0, "no NVML here, so the GPU's peak bandwidth is unknown")
    return peak
