"""Energy counters and the tracker that reads them around a block of work.

A Counter is one cumulative hardware counter (NVML's total energy of a GPU, a RAPL package
zone); an EnergyMeter holds the counters of the devices a configuration uses and, like
optimum-benchmark's trackers, is used as `with meter.track() as reading:` around the work.
Energy is always the difference of two counter readings, never power sampled and averaged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


class NotMeasurable(Exception):  # noqa: N818 - a state with its reason, not a failure
    """The counters cannot be read here; the message is the one sentence that says why."""


def wrapped_delta(before: int, after: int, max_range: int) -> int:
    """Units between two readings of a counter that restarts at 0 when it reaches max_range
    (RAPL's max_energy_range_uj). A reading lower than the one before means it wrapped once:
    a RAPL package zone takes minutes to hours to wrap, far longer than a window."""
    if after >= before:
        return after - before
    return max_range - before + after


@dataclass(frozen=True)
class Counter:
    """One cumulative counter: what it is, on which device, and how to read it.

    read() returns the raw value in the counter's unit (scale joules each); wrap is the value
    past which it restarts at 0 (RAPL's max_energy_range_uj), None when it does not wrap."""

    name: str
    device: str
    read: Callable[[], int]
    scale: float
    wrap: int | None = None

    def joules(self, before: int, after: int) -> float:
        if self.wrap is None:
            return (after - before) * self.scale
        return wrapped_delta(before, after, self.wrap) * self.scale

    @property
    def label(self) -> str:
        """'NVML total energy on GPU 0 (NVIDIA H200)': what a figure says measured it."""
        return f"{self.name} on {self.device}"


@dataclass
class Reading:
    """Energy over one tracked block: joules (every counter summed) and wall seconds."""

    joules: float = 0.0
    seconds: float = 0.0

    @property
    def watts(self) -> float | None:
        return self.joules / self.seconds if self.seconds > 0 else None


class EnergyMeter:
    """The counters of the devices one configuration uses, or the reason there are none."""

    def __init__(
        self,
        counters: list[Counter],
        reason: str | None = None,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.counters = counters
        self.reason = reason if not counters else None
        self._close = close

    @property
    def measurable(self) -> bool:
        return bool(self.counters)

    @property
    def source(self) -> str:
        """What measured the figures ('RAPL energy_uj on CPU package-0 (intel-rapl:0)'), or
        why nothing could."""
        if not self.counters:
            return self.reason or "not measurable here"
        return "; ".join(c.label for c in self.counters)

    def snapshot(self) -> list[int]:
        return [c.read() for c in self.counters]

    def joules_since(self, before: list[int], after: list[int]) -> float:
        return sum(c.joules(b, a) for c, b, a in zip(self.counters, before, after, strict=True))

    @contextmanager
    def track(self) -> Iterator[Reading]:
        """The block's energy and wall time, filled in when it ends (0 J when not measurable)."""
        reading = Reading()
        before = self.snapshot()
        start = time.perf_counter()
        try:
            yield reading
        finally:
            reading.seconds = time.perf_counter() - start
            reading.joules = self.joules_since(before, self.snapshot())

    def idle(self, seconds: float) -> Reading | None:
        """The devices at rest for `seconds` (this process sleeps): the baseline power; None
        (and no wait) when nothing can be measured here."""
        if not self.measurable:
            return None
        with self.track() as reading:
            time.sleep(seconds)
        return reading

    def close(self) -> None:
        if self._close is not None:
            self._close()
            self._close = None

    def __enter__(self) -> EnergyMeter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
