"""The recommendation under a p99 bound, from predictions (the real server confirms elsewhere)."""

from __future__ import annotations

import pytest

from backend.errors import UserError
from backend.serving.recommend import Variant, recommend
from backend.serving.types import LatencyCurve

SLOW = Variant("fp32", "cpu", LatencyCurve((1, 4, 16, 32), (1.0, 1.4, 3.4, 6.2), 0.2, 0.05))
FAST = Variant("int8_dynamic", "cpu", LatencyCurve((1, 4, 16, 32), (0.7, 1.0, 2.2, 4.0), 0.2, 0.05))


def test_a_bound_no_configuration_meets_says_so_and_names_the_closest() -> None:
    rec = recommend([SLOW, FAST], slo_p99_ms=0.5)  # one sample alone takes 0.9 ms end to end
    assert rec.best is None and rec.default is None
    assert rec.closest is not None
    assert rec.closest.point.latency.p99 == min(e.point.latency.p99 for e in rec.ranked)
    assert rec.closest.candidate.variant == FAST
    assert rec.sentence.startswith("In 40 predicted configurations")
    assert "none meets the p99 bound of 0.5 ms; the closest is INT8 dynamic on CPU" in rec.sentence


def test_the_best_configuration_beats_the_default_and_the_sentence_says_by_how_much() -> None:
    rec = recommend([SLOW, FAST], slo_p99_ms=8.0)
    assert rec.best is not None and rec.default is not None
    assert rec.best.candidate.policy.dynamic_batching
    assert rec.best.point.latency.p99 <= 8.0
    assert rec.best.rate_rps > rec.default.rate_rps > 0
    gain = (rec.best.point.achieved_rps / rec.default.point.achieved_rps - 1) * 100
    assert f"{gain:.0f}% more than the default (no dynamic batching, one instance)" in rec.sentence
    assert rec.ranked[0] == rec.best


def test_a_minimum_rate_beyond_every_configuration_leaves_no_recommendation() -> None:
    rec = recommend([SLOW], slo_p99_ms=8.0, min_rps=1_000_000)
    assert rec.best is None
    assert "at 1e+06 req/s or more; the closest is" in rec.sentence


def test_a_non_positive_bound_is_refused() -> None:
    with pytest.raises(UserError, match="positive number of milliseconds"):
        recommend([SLOW], slo_p99_ms=0)
