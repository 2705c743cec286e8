"""A load point's requests, kept: measured on the real server, packed for storage and read back
exactly; past the cap, every k-th request in completion order, and the point says so."""

from __future__ import annotations

import numpy as np

from backend.results import LatencyStats
from backend.serving.loadgen import measure_load
from backend.serving.samples import MAX_KEPT, RequestSamples
from backend.serving.sender import Record
from backend.serving.server import TritonServer
from backend.serving.types import LoadSpec, Scenario
from backend.specs import MEASURE_PRESETS
from storage.repo.serving import StoredSamples

QUICK = MEASURE_PRESETS["quick"]


def _round_trip(samples: RequestSamples) -> RequestSamples:
    return RequestSamples.unpacked(StoredSamples(**samples.packed()))


def test_a_measured_points_samples_give_back_its_figures_and_survive_packing(
    server: TritonServer,
) -> None:
    spec = LoadSpec(Scenario.SERVER, duration_s=1.0, target_rps=100, seed=2)
    measured = measure_load(server.endpoint, spec, QUICK)
    point, samples = measured.point, measured.samples
    assert samples.kept == samples.total == point.latency.count and not samples.thinned
    assert LatencyStats.from_samples(samples.latency_ms) == point.latency
    assert sorted(samples.scheduled_s.tolist()) == list(point.arrival_schedule_s)
    done = samples.sent_s + samples.latency_ms / 1000
    assert np.all(np.diff(done) >= -1e-9)  # in the order completed
    back = _round_trip(samples)
    for name in ("latency_ms", "sent_s", "scheduled_s"):
        assert np.array_equal(getattr(back, name), getattr(samples, name))  # bit for bit
    packed = sum(len(v) for v in samples.packed().values() if isinstance(v, bytes))
    assert packed < 20 * samples.kept  # JSON lists of the three took about 59 bytes a request

    closed = measure_load(server.endpoint, LoadSpec(Scenario.CONCURRENCY, duration_s=0.5), QUICK)
    assert closed.samples.scheduled_s is None  # a closed loop has no schedule
    assert _round_trip(closed.samples).scheduled_s is None


def test_past_the_cap_a_point_keeps_every_kth_request_over_its_whole_span() -> None:
    """The thinning rule on its own (a point of MAX_KEPT requests takes minutes to measure):
    10 requests capped at 4 keep every 3rd in completion order, first and spread to the end."""
    records = [Record(None, t / 10, t / 10 + 0.001 * (10 - t), True) for t in range(10)]
    samples = RequestSamples.from_records(records, cap=4)
    assert (samples.kept, samples.total, samples.thinned) == (4, 10, True)
    order = sorted(records, key=lambda r: r.done_s)
    assert samples.sent_s.tolist() == [r.sent_s for r in order[::3]]
    assert samples.rule == "one request in every 3, in completion order"
    assert _round_trip(samples).total == 10
    assert RequestSamples.from_records(records).kept == 10 <= MAX_KEPT
