"""Energy measured from hardware counters around timed windows (issue 24).

The trackers, by name: `nvml` reads NVIDIA GPUs' total energy counters, `rapl` the CPU package
zones under /sys/class/powercap. `meter_for` picks the one a configuration's provider runs on
and, where its counters cannot be read, returns a meter that carries the one-sentence reason;
a model-based estimate is never offered in place of a measurement.
"""

from __future__ import annotations

from collections.abc import Callable

from backend.energy import nvml, rapl
from backend.energy.counters import Counter, EnergyMeter, NotMeasurable, Reading, wrapped_delta
from backend.energy.report import IDLE_SECONDS, EnergyReport, energy_report

# name -> a meter over that kind of device (GPU indices for nvml; rapl reads every package)
TRACKERS: dict[str, Callable[[list[int]], EnergyMeter]] = {
    "nvml": nvml.meter,
    "rapl": lambda _gpus: rapl.meter(),
}
TRACKER_OF_PROVIDER = {"cpu": "rapl", "cuda": "nvml", "tensorrt": "nvml"}


def tracker(name: str, gpus: list[int] | None = None) -> EnergyMeter:
    """The named tracker's meter, or a meter that says why it cannot measure here; a failing
    counter never fails the measurement it would have accompanied."""
    try:
        return TRACKERS[name](list(gpus or [0]))
    except NotMeasurable as exc:
        return EnergyMeter([], reason=str(exc))
    except Exception as exc:  # a driver or sysfs error while opening the counters
        return EnergyMeter([], reason=f"not measurable here: {name} failed ({exc})")


def meter_for(provider: str, gpus: list[int] | None = None) -> EnergyMeter:
    """The meter of the device this provider computes on (its GPUs for CUDA and TensorRT)."""
    name = TRACKER_OF_PROVIDER.get(provider)
    if name is None:
        return EnergyMeter(
            [], reason=f"not measurable here: no energy counter is read for {provider}"
        )
    return tracker(name, gpus)


__all__ = [
    "IDLE_SECONDS",
    "TRACKERS",
    "Counter",
    "EnergyMeter",
    "EnergyReport",
    "NotMeasurable",
    "Reading",
    "energy_report",
    "meter_for",
    "tracker",
    "wrapped_delta",
]
