"""The hardware a number ran on: NVIDIA GPUs through NVML (nvidia-ml-py), the one place that
initialises and shuts it down, and the CPU's SIMD flags.

Every caller (the environment record, the telemetry sampler, the provider probe's device name)
goes through `nvml()`, so a host without a driver is handled once: the functions here return
nothing instead of raising.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _text(value: bytes | str) -> str:
    """NVML strings are bytes in older bindings and str in newer ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


@contextmanager
def nvml() -> Iterator[Any | None]:
    """The initialised pynvml module for the block, or None where NVML does not work here."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no package, no driver, no GPU: all mean "no NVIDIA GPU to report"
        yield None
        return
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()  # NVML counts init/shutdown pairs, so nested use is safe


def nvml_unavailable_reason() -> str | None:
    """Why NVML does not start here, in words (no package, no driver); None where it does."""
    try:
        import pynvml
    except ImportError:
        return "the nvidia-ml-py package (pynvml) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return f"NVML does not start ({exc}): no NVIDIA driver on this machine"
    pynvml.nvmlShutdown()
    return None


def gpu_inventory() -> list[dict[str, Any]]:
    """Every NVIDIA GPU with its name, memory and driver; empty where there is no driver."""
    with nvml() as nv:
        if nv is None:
            return []
        driver = _text(nv.nvmlSystemGetDriverVersion())
        gpus = []
        for index in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            gpus.append(
                {
                    "index": index,
                    "name": _text(nv.nvmlDeviceGetName(handle)),
                    "memory_total_mb": round(nv.nvmlDeviceGetMemoryInfo(handle).total / 2**20),
                    "driver": driver,
                }
            )
        return gpus


def gpu_name(index: int = 0) -> str | None:
    """One GPU's name, or None where NVML cannot see it."""
    with nvml() as nv:
        if nv is None:
            return None
        try:
            return _text(nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(index)))
        except Exception:  # an index past the last GPU
            return None


def gpu_memory_used_mb(index: int = 0) -> float | None:
    """Memory in use on one GPU now (all processes), or None where NVML cannot see it."""
    with nvml() as nv:
        if nv is None:
            return None
        try:
            return nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(index)).used / 2**20
        except Exception:  # an index past the last GPU
            return None


@contextmanager
def gpu_reader(index: int | None) -> Iterator[Callable[[], dict[str, float]] | None]:
    """A function that reads one GPU's load, memory, power and temperature now; None without one."""
    if index is None:
        yield None
        return
    with nvml() as nv:
        try:
            handle = None if nv is None else nv.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # an index past the last GPU
            handle = None
        if nv is None or handle is None:
            yield None
            return

        def read() -> dict[str, float]:
            util = nv.nvmlDeviceGetUtilizationRates(handle)
            return {
                "gpu_util_percent": float(util.gpu),
                "gpu_memory_used_mb": nv.nvmlDeviceGetMemoryInfo(handle).used / 2**20,
                "gpu_power_w": nv.nvmlDeviceGetPowerUsage(handle) / 1000,
                "gpu_temperature_c": float(
                    nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU)
                ),
            }

        yield read


def visible_gpu_index() -> int:
    """NVML's index of the GPU CUDA calls device 0 here: the first of CUDA_VISIBLE_DEVICES
    (Ray sets it to the GPU it gave the task), since NVML numbers every GPU regardless."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


_FLAGS = {
    "avx2": ("avx2",),
    "avx512f": ("avx512f",),
    "avx512_vnni": ("avx512_vnni", "avx_vnni"),
    "amx": ("amx_int8", "amx_tile"),
}


def cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, bool]:
    """Which int8/float SIMD extensions this CPU has (all False where /proc/cpuinfo is absent)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        text = ""
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags") and ":" in line:
            flags.update(line.split(":", 1)[1].split())
    return {name: any(f in flags for f in names) for name, names in _FLAGS.items()}


def has_vnni(cpu: dict[str, bool] | None = None) -> bool:
    """Whether int8 products are summed in 32 bits here (VNNI or AMX), as cpu_features says;
    without, ONNX Runtime's U8S8 kernels sum pairs in 16 bits (backend/runtimes/ort_int8.py)."""
    flags = cpu_features() if cpu is None else cpu
    return bool(flags.get("avx512_vnni") or flags.get("amx"))
