"""The physical limit of decoding: a device's peak memory bandwidth, and how much of it a
measured inter-token latency achieved (bytes read per step / seconds per step). On a device
whose last-level cache (a CPU's L3, a GPU's L2) holds every byte a step reads, that share is of
cache traffic, not of DRAM or HBM bandwidth, and the roofline says so beside it."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import settings
from backend.generate.dramshare import mb
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
COPY_REPEATS = 10
CPU_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class PeakBandwidth:
    """A device's peak bandwidth and where the number came from (a sentence)."""

    device: str
    bytes_per_s: float
    source: str
    # the last-level cache ("L3" on a CPU, "L2" on a GPU; bytes; where read or why unknown);
    # "" in points stored before the cache was recorded
    cache_level: str = ""
    cache_bytes: int = 0
    cache_source: str = ""

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

    @property
    def in_cache(self) -> bool | None:
        """Whether the bytes a step reads fit in the device's last-level cache (None: unknown,
        or not recorded)."""
        if not self.peak.cache_level or not self.peak.cache_bytes:
            return None
        return self.bytes_per_step <= self.peak.cache_bytes

    @property
    def note(self) -> str:
        """What the fraction is not, said beside it: "" when it is a DRAM (HBM) figure."""
        read = (  # not the chart's weights + KV: no lookup tables, KV at the mean context
            f"the {_mb(self.bytes_per_step)} a decode step reads (weights less the lookup "
            "tables, + KV cache)"
        )
        if self.in_cache:
            return (
                f"{read} fit in the {_mb(self.peak.cache_bytes)} {self.peak.cache_level}: "
                "this is not a memory-bandwidth figure"
            )
        if self.peak.cache_level and not self.peak.cache_bytes:
            return (
                f"the last-level cache size is unknown ({self.peak.cache_source}), so "
                f"whether {read} stay in cache, and this is a memory-bandwidth figure, is unknown"
            )
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "fraction": self.fraction,
            "in_cache": self.in_cache,
            "note": self.note,
        }


_mb = mb


def roofline(bytes_per_step: float, itl_ms: float, peak: PeakBandwidth) -> Roofline:
    achieved = bytes_per_step / (itl_ms / 1e3) if itl_ms > 0 else 0.0
    return Roofline(bytes_per_step, itl_ms, achieved, peak)


def gpu_peak(index: int = 0) -> PeakBandwidth | None:
    """NVML's memory bus width x max memory clock x 2 (double data rate); else the datasheet
    figure for the GPU's name; with the GPU's L2 size (gpu_l2_cache). None without NVML."""
    with nvml() as nv:
        if nv is None:
            return None
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        name = nv.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else str(name)
        bus_id = nv.nvmlDeviceGetPciInfo(handle).busId
        cache = ("L2", *gpu_l2_cache(bus_id.decode() if isinstance(bus_id, bytes) else bus_id))
        for key, value in GPU_SPEC_BYTES_S.items():
            if key in name:
                return PeakBandwidth(
                    name, value, f"{name} datasheet: {value / 1e12:.2f} TB/s", *cache
                )
        try:
            bus_bits = nv.nvmlDeviceGetMemoryBusWidth(handle)
            clock_mhz = nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_MEM)
        except Exception as exc:  # NVML raises its own error types per missing query
            return PeakBandwidth(name, 0.0, f"NVML cannot read {name}'s memory bus ({exc})", *cache)
        value = bus_bits / 8 * clock_mhz * 1e6 * 2
        source = f"NVML: {bus_bits}-bit bus x {clock_mhz} MHz x 2 = {value / 1e12:.2f} TB/s"
        return PeakBandwidth(name, value, source, *cache)


CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38  # cuda.h's CUdevice_attribute


def gpu_l2_cache(pci_bus_id: str) -> tuple[int, str]:
    """The L2 size in bytes of the GPU at this PCI address, and where it was read, from the CUDA
    driver (NVML does not report it); 0 and why where the driver cannot say. The driver API
    only: it opens no context on the GPU."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return 0, f"no CUDA driver library here ({exc})"
    device, size = ctypes.c_int(), ctypes.c_int()
    calls = (
        ("cuInit", lambda: cuda.cuInit(0)),
        (
            "cuDeviceGetByPCIBusId",
            lambda: cuda.cuDeviceGetByPCIBusId(ctypes.byref(device), pci_bus_id.encode()),
        ),
        (
            "cuDeviceGetAttribute",
            lambda: cuda.cuDeviceGetAttribute(
                ctypes.byref(size), CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device
            ),
        ),
    )
    for name, call in calls:
        if (error := call()) != 0:
            return 0, f"the CUDA driver's {name} returned error {error}"
    return size.value, f"CUDA driver, device at PCI {pci_bus_id}"


def _size_bytes(text: str) -> int:
    """sysfs's "32768K" (or "1M", or plain bytes) as bytes."""
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def cache_from_sysfs(root: Path = CPU_CACHES) -> tuple[str, int] | None:
    """The highest-level data or unified cache of cpu0 as ("L3", bytes); None if unreadable."""
    found: tuple[int, int] | None = None
    for index in sorted(root.glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            size = _size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if found is None or level > found[0]:
            found = (level, size)
    return (f"L{found[0]}", found[1]) if found else None


def last_level_cache() -> tuple[str, int, str]:
    """(level, bytes, where read), or ("unknown", 0, why) when sysfs does not say (lscpu reads
    the same files, so it would not know either)."""
    if found := cache_from_sysfs():
        return (*found, str(CPU_CACHES))
    return "unknown", 0, f"{CPU_CACHES} does not list it"


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
    """This host's copy bandwidth, measured once per host (per CPU model) and kept in the data
    folder, so every point of a job and every job on the host are shares of the same figure;
    the file is measured again only when it is missing, damaged or of another CPU (a CPU has
    no NVML, and its datasheet peak is rarely reachable by one process). With the CPU's
    last-level cache, which the roofline compares each step's bytes with."""
    from backend.host import describe_environment

    cpu = describe_environment()["cpu"]
    path = _cache_file()
    kept: dict[str, Any] = {}
    if path.is_file():
        try:
            kept = json.loads(path.read_text())
            kept = kept if kept.get("cpu") == cpu and float(kept["bytes_per_s"]) > 0 else {}
        except (ValueError, KeyError, TypeError, AttributeError):
            kept = {}  # a damaged cache file: measured again
    if not kept:
        kept = {
            "cpu": cpu,
            "bytes_per_s": measure_copy_bandwidth(),
            "measured_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")  # two workers never read half a file
        partial.write_text(json.dumps(kept))
        partial.replace(path)
    best = float(kept["bytes_per_s"])
    when = kept.get("measured_at", "earlier")
    level, size, where = last_level_cache()
    return PeakBandwidth(
        cpu,
        best,
        f"numpy copy of {COPY_MB} MiB on this host, the best of {COPY_REPEATS} copies: "
        f"{best / 1e9:.1f} GB/s (read + write), measured {when} and kept for every job on this "
        f"host (delete {path.name} in the data folder's cache to measure again)",
        cache_level=level,
        cache_bytes=size,
        cache_source=where,
    )


def device_peak(device: str) -> PeakBandwidth:
    """The peak a decode on `device` ("cpu", "cuda", "gpu") is compared with."""
    if device == "cpu":
        return cpu_peak()
    peak = gpu_peak()
    if peak is None:
        return PeakBandwidth(device, 0.0, "no NVML here, so the GPU's peak bandwidth is unknown")
    return peak
