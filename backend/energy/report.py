"""An energy figure as stored with a result: per item (sample, request, token), with its spread
over the timed windows, the idle baseline apart, and what measured it or why nothing could."""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.energy.counters import EnergyMeter, Reading

IDLE_SECONDS = 1.0  # the idle window before the timed loop (devices at rest, session open)


@dataclass(frozen=True)
class EnergyReport:
    """Joules per item of each kept timed window (median and min-max of those), the mean power
    over them, and the idle power measured apart before the loop; above_idle subtracts idle
    power x window time. `source` names the counters and devices, or says why not measurable."""

    source: str
    measured: bool = False
    per: str = "sample"
    j_per_item: list[float] = field(default_factory=list)  # one value per kept window
    j_p50: float | None = None
    j_min: float | None = None
    j_max: float | None = None
    j_above_idle_p50: float | None = None
    active_w: float | None = None
    idle_w: float | None = None
    idle_seconds: float | None = None
    window_seconds_min: float | None = None  # NVML refreshes its counter every 20-100 ms

    @property
    def summary(self) -> str:
        """'0.0123 J/sample (0.0120-0.0125 over 3 windows), idle 61.2 W; NVML ... on GPU 0'."""
        if not self.measured or self.j_p50 is None:
            return f"energy: {self.source}"
        idle = f", idle {self.idle_w:.1f} W" if self.idle_w is not None else ""
        count = len(self.j_per_item)
        spread = f" ({self.j_min:.4g}-{self.j_max:.4g} over {count} windows)" if count > 1 else ""
        return (
            f"{self.j_p50:.4g} J/{self.per}{spread}, {self.active_w:.1f} W while timed{idle}; "
            f"measured by {self.source}"
        )


def energy_report(
    meter: EnergyMeter,
    windows: list[tuple[Reading, int]],
    idle: Reading | None = None,
    per: str = "sample",
) -> EnergyReport:
    """The report of these windows (each a reading and the items it processed)."""
    kept = [(r, n) for r, n in windows if n > 0 and r.seconds > 0]
    if not meter.measurable or not kept:
        return EnergyReport(source=meter.source, per=per)
    import numpy as np  # here: results (and the CLI's parser through them) read EnergyReport

    values = np.array([r.joules / n for r, n in kept])
    idle_w = idle.watts if idle is not None else None
    above = (
        float(np.median([(r.joules - idle_w * r.seconds) / n for r, n in kept]))
        if idle_w is not None
        else None
    )
    seconds = sum(r.seconds for r, _ in kept)
    return EnergyReport(
        source=meter.source,
        measured=True,
        per=per,
        j_per_item=values.tolist(),
        j_p50=float(np.median(values)),
        j_min=float(values.min()),
        j_max=float(values.max()),
        j_above_idle_p50=above,
        active_w=sum(r.joules for r, _ in kept) / seconds,
        idle_w=idle_w,
        idle_seconds=idle.seconds if idle is not None else None,
        window_seconds_min=min(r.seconds for r, _ in kept),
    )
