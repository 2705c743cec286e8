"""CPU energy from RAPL: the cumulative counters Linux exposes under /sys/class/powercap.

Each package zone (intel-rapl:N named package-N; AMD EPYC kernels expose theirs under the same
name) has energy_uj, a counter in microjoules that wraps at max_energy_range_uj. Only package
zones are summed: their subzones (core, uncore) are inside them, and psys would count twice.
Where nothing can be read the reason is one sentence that says what this machine lacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from backend.energy.counters import Counter, EnergyMeter, NotMeasurable

POWERCAP = Path("/sys/class/powercap")
COUNTER = "RAPL energy_uj"
_ZONE = re.compile(r"^intel-rapl:\d+$")  # a top-level zone; intel-rapl:0:1 is a subzone


def package_zones(root: Path = POWERCAP) -> list[Path]:
    """The top-level package zones under root, in their numeric order."""
    zones = []
    for zone in root.glob("intel-rapl:*"):
        name = zone / "name"
        if _ZONE.match(zone.name) and name.is_file() and _read(name).startswith("package"):
            zones.append(zone)
    return sorted(zones, key=lambda z: int(z.name.split(":")[1]))


def unreadable_reason(root: Path = POWERCAP) -> str | None:
    """Why RAPL cannot be read here, in one sentence; None when every package zone reads."""
    if not root.is_dir():
        return (
            f"not measurable here: {root} does not exist (this kernel exposes no power-capping "
            "counters; usual in a virtual machine or container)"
        )
    zones = package_zones(root)
    if not zones:
        return (
            f"not measurable here: {root} has no RAPL zone (a virtual machine, or a CPU "
            "without RAPL)"
        )
    for zone in zones:
        try:
            int(_read(zone / "energy_uj"))
        except PermissionError:
            return (
                f"not measurable here: {zone / 'energy_uj'} is readable by root only "
                "(since CVE-2020-8694)"
            )
        except (OSError, ValueError) as exc:
            return f"not measurable here: {zone / 'energy_uj'} cannot be read ({exc})"
    return None


def meter(root: Path = POWERCAP) -> EnergyMeter:
    """A meter over every package zone; NotMeasurable with the reason where RAPL cannot be read."""
    reason = unreadable_reason(root)
    if reason:
        raise NotMeasurable(reason)
    found = []
    for zone in package_zones(root):
        max_range = int(_read(zone / "max_energy_range_uj"))
        found.append(
            Counter(
                name=COUNTER,
                device=f"CPU {_read(zone / 'name')} ({zone.name})",
                read=_reader(zone / "energy_uj"),
                wrap=max_range,
                scale=1e-6,
            )
        )
    return EnergyMeter(found)


def _reader(path: Path) -> Callable[[], int]:
    return lambda: int(_read(path))


def _read(path: Path) -> str:
    return path.read_text().strip()
