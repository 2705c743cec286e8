"""A load point's raw per-request timings: what its percentiles were computed from, kept so they
can be recomputed, audited and drawn later (a sweep's results keep theirs in result_samples).

Each successful request of the point, in the order completed: its client-observed latency (ms,
the very value the point's LatencyStats were computed from), when it left (s from the point's
start, on the clock the generator sent on) and, for a Server point, when its schedule wanted it to
leave (lateness = sent - scheduled, as loadgen.saturation_reason computes it). Failed requests
are counted on the point (`errors`) and not kept.

Stored packed (ENCODING): each array as little-endian float64, its bytes grouped by significance
(byte 0 of every value, then byte 1, ...) and zlib-compressed. float64 keeps every value exact, so
a recomputed p99 equals the stored one; as JSON lists the same values took about 20 bytes a
request. Past MAX_KEPT requests a point keeps every k-th in completion order (k the smallest
that fits), spread evenly over the whole point, and says how many it kept of how many.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from backend.serving.sender import Record
from backend.serving.types import LoadPoint

ENCODING = "f8le-byteplanes-zlib"
MAX_KEPT = 500_000  # requests per point: 120 s (the page's longest point) at 4,166 req/s


class PackedSamples(Protocol):
    """What storage keeps of a point's samples (storage.repo.serving.StoredSamples)."""

    encoding: str
    kept: int
    total: int
    latency_ms: bytes
    sent_s: bytes
    scheduled_s: bytes | None


@dataclass(frozen=True, eq=False)
class RequestSamples:
    """Each kept successful request of one load point, in the order completed."""

    latency_ms: np.ndarray
    sent_s: np.ndarray
    scheduled_s: np.ndarray | None  # Server only: when the schedule wanted each to leave
    total: int  # successful requests the point measured (kept <= total)

    @property
    def kept(self) -> int:
        return int(self.latency_ms.size)

    @property
    def thinned(self) -> bool:
        return self.kept < self.total

    @property
    def rule(self) -> str:
        """Which requests were kept, in words (an export and the page say it)."""
        if not self.thinned:
            return "every successful request, in completion order"
        return f"one request in every {math.ceil(self.total / self.kept)}, in completion order"

    @classmethod
    def from_records(cls, good: Sequence[Record], cap: int = MAX_KEPT) -> RequestSamples:
        """The successful records, ordered by completion, every k-th past `cap`."""
        done = sorted(good, key=lambda r: r.done_s)
        step = max(1, math.ceil(len(done) / cap))
        kept = done[::step]
        scheduled = [r.scheduled_s for r in kept]
        return cls(
            latency_ms=np.array([1000 * (r.done_s - r.sent_s) for r in kept], dtype=np.float64),
            sent_s=np.array([r.sent_s for r in kept], dtype=np.float64),
            scheduled_s=(
                np.array(scheduled, dtype=np.float64)
                if kept and all(s is not None for s in scheduled)
                else None
            ),
            total=len(done),
        )

    def packed(self) -> dict[str, Any]:
        """The fields storage.repo.serving.StoredSamples takes."""
        return {
            "encoding": ENCODING,
            "kept": self.kept,
            "total": self.total,
            "latency_ms": _pack(self.latency_ms),
            "sent_s": _pack(self.sent_s),
            "scheduled_s": None if self.scheduled_s is None else _pack(self.scheduled_s),
        }

    @classmethod
    def unpacked(cls, stored: PackedSamples) -> RequestSamples:
        if stored.encoding != ENCODING:  # a newer Optiboard's packing: never misread
            raise ValueError(f"unknown sample encoding {stored.encoding!r}")
        return cls(
            latency_ms=_unpack(stored.latency_ms),
            sent_s=_unpack(stored.sent_s),
            scheduled_s=None if stored.scheduled_s is None else _unpack(stored.scheduled_s),
            total=stored.total,
        )

    def to_dict(self) -> dict[str, Any]:
        """As an export writes them: plain lists (float64 written exactly), kept of total."""
        return {
            "kept": self.kept,
            "of": self.total,
            "rule": self.rule,
            "latency_ms": self.latency_ms.tolist(),
            "sent_s": self.sent_s.tolist(),
            "scheduled_s": None if self.scheduled_s is None else self.scheduled_s.tolist(),
        }


@dataclass(frozen=True)
class MeasuredLoad:
    """A load point and the requests its latency figures were computed from (loadgen)."""

    point: LoadPoint
    samples: RequestSamples


def _pack(values: np.ndarray) -> bytes:
    planes = np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(-1, 8).T
    return zlib.compress(planes.tobytes(), 6)


def _unpack(data: bytes) -> np.ndarray:
    planes = np.frombuffer(zlib.decompress(data), dtype=np.uint8).reshape(8, -1)
    return planes.T.copy().view("<f8").reshape(-1).astype(np.float64)
