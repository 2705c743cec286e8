"""A serving study's sentence on the Serve page (view._study_sentence): its rates are written as
the cost sentence beside it writes them, with thousands separators."""

from __future__ import annotations

import re

from backend.serving.simulate import simulate
from backend.serving.types import BatchingPolicy, LoadSpec, Scenario
from backend.serving.view import MeasuredConfiguration, _study_sentence
from tests.backend.serving.test_recommend import SLOW


def test_a_study_sentence_writes_thousands_with_separators() -> None:
    """'meets the p99 bound ... at 2267 req/s' stood beside the cost box's '2,267 req/s'."""
    policy = BatchingPolicy(max_batch_size=32)
    load = LoadSpec(Scenario.SERVER, target_rps=3000.0, seed=0)
    point = simulate(SLOW.curve, load, policy, requests=2000)
    assert point.stable and point.achieved_rps >= 1000, point
    meets, met = _study_sentence([MeasuredConfiguration("FP32, max 32", [point], [])], 1000.0)
    assert met and f" at {point.achieved_rps:,.0f} req/s (p99" in meets, meets
    misses, met = _study_sentence([MeasuredConfiguration("FP32, max 32", [point], [])], 0.01)
    assert not met and f" at {point.achieved_rps:,.0f} req/s (FP32, max 32" in misses, misses
    assert not re.search(r"\d{4} req/s", meets + misses)
