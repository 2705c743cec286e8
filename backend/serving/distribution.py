"""The stored requests of a study's load points, read back: `optiboard export --format json`'s
samples of every point.

Each point measured since migration 0015 has its requests' timings stored beside it
(backend/serving/samples.py); a point stored before has none, and the export says so.
"""

from __future__ import annotations

from backend.serving.samples import RequestSamples
from storage.repo import serving as point_store

BEFORE = "stored before Optiboard kept each request's latency (migration 0015)"


def stored_samples(point_ids: list[int]) -> dict[int, RequestSamples]:
    """The samples of those points that have them, by point id."""
    return {
        point_id: RequestSamples.unpacked(stored)
        for point_id, stored in point_store.point_samples(point_ids).items()
    }
