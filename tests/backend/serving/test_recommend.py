"""The recommendation under a p99 bound, from predictions (the real server confirms elsewhere)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from backend.errors import UserError
from backend.serving.confirm import GENERATOR_STEPS
from backend.serving.recommend import CONFIRM_HEADROOM, Confirm, MeasuredVariant, Trial, recommend
from backend.serving.simulate import simulate
from backend.serving.types import LatencyCurve, LoadPoint

SLOW = MeasuredVariant("fp32", "cpu", LatencyCurve((1, 4, 16, 32), (1.0, 1.4, 3.4, 6.2), 0.2, 0.05))
# batching gains little: a batched pick's rate measured at a fallback step falls below the
# default's measured in full
LINEAR = MeasuredVariant(
    "fp32", "cpu", LatencyCurve((1, 4, 16, 32), (1.0, 3.0, 11.0, 21.0), 0.2, 0.05)
)
FAST = MeasuredVariant(
    "int8_dynamic", "cpu", LatencyCurve((1, 4, 16, 32), (0.7, 1.0, 2.2, 4.0), 0.2, 0.05)
)


def test_a_bound_no_configuration_meets_says_so_and_names_the_closest() -> None:
    rec = recommend([SLOW, FAST], slo_p99_ms=0.5)  # one sample alone takes 0.9 ms end to end
    assert rec.best is None and rec.default is None
    assert rec.closest is not None
    assert rec.closest.point.latency.p99 == min(e.point.latency.p99 for e in rec.ranked)
    assert rec.closest.candidate.variant == FAST
    # two variants x 10 policies: one instance each, how two share the host not being measured
    assert rec.sentence.startswith("In 20 predicted configurations")
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


def _fallen_back(share_batched: float, share_default: float) -> Confirm:
    """A measured world where the load generator offered only a share of the asked rate (as
    confirm.GENERATOR_STEPS falls back), per kind of policy; the server keeps up with it."""

    def measure(trial: Trial) -> LoadPoint:
        batched = trial.candidate.policy.dynamic_batching
        rate = (trial.load.target_rps or 1.0) * (share_batched if batched else share_default)
        spec = replace(trial.load, target_rps=rate)
        return simulate(trial.candidate.variant.curve, spec, trial.candidate.policy, requests=2000)

    return measure


def test_a_default_measured_at_another_generator_step_is_never_declared_best() -> None:
    """The batched pick's generator fell back to 20% of its rate, the default's ran in full:
    the default's higher measured rate is the generator's, not the server's; not compared."""
    assert 0.2 in GENERATOR_STEPS
    rec = recommend([LINEAR], slo_p99_ms=20.0, confirm=_fallen_back(0.2, 1.0), confirm_top=2)
    assert rec.best is not None and rec.default is not None and rec.best is not rec.default
    assert rec.best.candidate.policy.dynamic_batching
    assert rec.default.point.achieved_rps > rec.best.point.achieved_rps  # what fooled it
    assert (rec.best.share, rec.default.share) == (0.2, 1.0)
    assert "is the best" not in rec.sentence and "% more" not in rec.sentence
    assert "% less" not in rec.sentence
    assert (
        "and the default (no dynamic batching, one instance) met it at "
        f"{rec.default.point.achieved_rps:,.0f} req/s; not compared, the pick measured at 20% "
        "of the rate asked and the default measured at 100% of the rate asked"
    ) in rec.sentence
    # the confirmed keep their predicted order: a fallback does not rank them either
    confirmed = [e for e in rec.ranked if e.measured is not None]
    assert [e.rate_rps for e in confirmed] == sorted((e.rate_rps for e in confirmed), reverse=True)


def test_a_measured_default_that_beats_the_pick_measured_alike_becomes_the_answer() -> None:
    """Both measured at the same share of their asked rates, and the batched servers served
    less than the default: the measured default then wins, and says so."""

    def measured_world(trial: Trial) -> LoadPoint:
        point = _fallen_back(0.6, 0.6)(trial)
        if trial.candidate.policy.dynamic_batching:
            return replace(point, achieved_rps=point.achieved_rps * 0.05)
        return point

    rec = recommend([FAST], slo_p99_ms=8.0, confirm=measured_world, confirm_top=2)
    assert rec.best is rec.default and rec.default is not None
    assert not rec.best.candidate.policy.dynamic_batching
    batched = [e for e in rec.ranked if e.measured is not None and e is not rec.default]
    assert batched and all(e.point.achieved_rps < rec.best.point.achieved_rps for e in batched)
    assert "the default (no dynamic batching, one instance) is the best" in rec.sentence
    assert f"the best predicted policy, {batched[0].candidate.label}, measured" in rec.sentence
    assert "less than the default" not in rec.sentence


def test_a_confirmed_evidence_carries_the_prediction_at_the_measured_rate() -> None:
    rec = recommend([FAST], slo_p99_ms=8.0, confirm=_fallen_back(0.6, 1.0), confirm_top=1)
    best = rec.best
    assert best is not None and best.measured is not None and best.expected is not None
    assert best.expected.predicted and best.expected.spec == best.measured.spec
    assert best.asked_rps == pytest.approx(best.rate_rps * CONFIRM_HEADROOM)


def test_a_default_the_generator_could_not_measure_is_said_so_not_called_a_miss() -> None:
    """When even the lowest rate is beyond the load generator for the default, its point says
    nothing about the server: the sentence says it could not be measured, never that it missed."""

    def measured_world(trial: Trial) -> LoadPoint:
        point = simulate(trial.candidate.variant.curve, trial.load, trial.candidate.policy,
                         requests=2000)  # fmt: skip
        return replace(point, generator_saturated=not trial.candidate.policy.dynamic_batching)

    rec = recommend([FAST], slo_p99_ms=8.0, confirm=measured_world, confirm_top=1)
    assert rec.best is not None and rec.best.candidate.policy.dynamic_batching
    assert rec.default is not None and rec.default.measured is not None
    assert "missed it" not in rec.sentence
    assert (
        "where the default (no dynamic batching, one instance) could not be measured: the load "
        f"generator fell behind even at {rec.default.point.achieved_rps:,.0f} req/s"
    ) in rec.sentence


def _served_as_is(trial: Trial) -> LoadPoint:
    """A measured world that serves each trial as the simulation predicts it."""
    return simulate(trial.candidate.variant.curve, trial.load, trial.candidate.policy,
                    requests=2000)  # fmt: skip


def test_confirm_with_nothing_predicted_to_meet_the_bound_measures_the_closest() -> None:
    """`--confirm 1` under a bound no prediction met confirmed nothing (0 measurements, "none
    measured on the server yet"): it now measures the closest, and the sentence says why."""
    rec = recommend([SLOW, FAST], slo_p99_ms=0.5, confirm=_served_as_is, confirm_top=1)
    assert rec.measurements == 1 and rec.confirmed_closest
    (measured,) = [e for e in rec.ranked if e.measured is not None]
    assert measured.rate_rps == 0  # predicted to miss at every rate, measured at a light load
    assert rec.best is None and rec.closest is measured
    assert rec.sentence.startswith(
        "In 1 measurement across 1 configuration (the closest of 20 predicted, none of which "
        "was predicted to meet the bound), none meets the p99 bound of 0.5 ms; the closest is "
        f"{measured.candidate.label} with p99 "
    ), rec.sentence
    assert rec.sentence.endswith("(measured).")


def test_a_closest_confirmed_that_meets_the_bound_on_the_server_is_the_measured_answer() -> None:
    """The prediction missed the bound, the server met it: the measurement is the answer, at
    the light load it was measured at, and the sentence says no higher rate was searched."""

    def quicker(trial: Trial) -> LoadPoint:
        point = _served_as_is(trial)
        return replace(point, latency=replace(point.latency, p99=0.4))

    rec = recommend([FAST], slo_p99_ms=0.5, confirm=quicker, confirm_top=1)
    assert rec.best is not None and rec.best.measured is not None and rec.best.rate_rps == 0
    rate = f"{rec.best.measured.achieved_rps:.0f}"
    assert f"meets the p99 bound of 0.5 ms at {rate} req/s (measured at a light load only" in (
        rec.sentence
    )
    assert rec.rate_under_bound(rec.best) == rec.best.measured.achieved_rps
    # the closest at a light load is Triton's default, measured: never compared with itself
    assert rec.best is rec.default
    assert "the default (no dynamic batching, one instance) is the best" in rec.sentence
    assert "the best predicted policy" not in rec.sentence, rec.sentence


def test_without_confirm_nothing_predicted_to_meet_measures_nothing() -> None:
    rec = recommend([SLOW, FAST], slo_p99_ms=0.5)
    assert rec.measurements == 0 and not rec.confirmed_closest
    assert rec.sentence.startswith("In 20 predicted configurations (none measured")


def test_a_rate_limited_by_saturation_says_so_and_one_limited_by_the_bound_does_not() -> None:
    """A walkthrough quoted "meets the p99 bound of 10 ms at 2267 req/s (p99 7.83 ms)": the
    bound did not decide that rate, the server's predicted capacity did, and nothing said so."""
    saturation = "; saturation, not the p99 bound, limits the pick's rate (offered more"
    loose = recommend([SLOW], slo_p99_ms=1000.0)  # no p99 near it: capacity decides
    assert loose.best is not None and loose.best.saturated
    assert loose.best.point.latency.p99 < 100
    assert saturation in loose.verdict, loose.verdict
    # rates in thousands are written with separators, as the cost sentence beside them is
    assert f" at {loose.best.rate:,.0f} req/s" in loose.verdict and loose.best.rate >= 1000
    tight = recommend([SLOW], slo_p99_ms=8.0)  # p99 7.9 ms at the rate found: the bound decides
    assert tight.best is not None and not tight.best.saturated
    assert "saturation" not in tight.sentence, tight.sentence


def test_the_verdict_and_its_details_make_the_cli_paragraph() -> None:
    """The page shows the verdict apart and the rest as a list; the CLI joins them."""
    rec = recommend([SLOW, FAST], slo_p99_ms=8.0)
    assert rec.sentence == " ".join((rec.verdict, *rec.details))
    assert rec.verdict.endswith(".") and rec.verdict.count(". ") == 0, rec.verdict
