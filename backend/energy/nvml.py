"""NVIDIA GPU energy from NVML's total energy counter (nvmlDeviceGetTotalEnergyConsumption).

The counter is the millijoules the GPU used since the driver loaded (Volta and newer): the
energy of a window is the difference of two readings, with no sampling. NVML refreshes it every
20-100 ms, so windows much shorter than that are coarse. Without the package, the driver, the
GPU or the counter, NotMeasurable says which.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from backend.counts import counted
from backend.energy.counters import Counter, EnergyMeter, NotMeasurable
from backend.hardware import nvml, nvml_unavailable_reason

COUNTER = "NVML nvmlDeviceGetTotalEnergyConsumption"


def meter(indices: list[int]) -> EnergyMeter:
    """A meter over the total energy counters of these GPUs (NVML's numbering); NVML stays
    initialised until the meter closes."""
    stack = ExitStack()
    nv = stack.enter_context(nvml())
    if nv is None:
        stack.close()
        raise NotMeasurable(f"not measurable here: {nvml_unavailable_reason()}")
    try:
        found = [_counter(nv, index) for index in indices]
    except Exception:  # NotMeasurable or a driver error: NVML is shut down either way
        stack.close()
        raise
    return EnergyMeter(found, close=stack.close)


def _counter(nv: Any, index: int) -> Counter:
    count = nv.nvmlDeviceGetCount()
    if index >= count:
        raise NotMeasurable(
            f"not measurable here: NVML sees {counted(count, 'GPU')}, none with index {index}"
        )
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    name = nv.nvmlDeviceGetName(handle)
    name = name.decode() if isinstance(name, bytes) else str(name)
    try:
        nv.nvmlDeviceGetTotalEnergyConsumption(handle)
    except nv.NVMLError as exc:
        raise NotMeasurable(
            f"not measurable here: GPU {index} ({name}) has no total energy counter ({exc}); "
            "NVML keeps one on Volta and newer GPUs"
        ) from None
    return Counter(
        name=COUNTER,
        device=f"GPU {index} ({name})",
        read=lambda: int(nv.nvmlDeviceGetTotalEnergyConsumption(handle)),
        scale=1e-3,
    )
