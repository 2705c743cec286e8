"""Recommendation under a p99 bound: predict every configuration, confirm the best few for real.

A configuration is a variant (precision x provider, with its measured latency curve) and a
batching policy. Each is scored by the highest Server (Poisson) rate at which its predicted p99
stays within the bound; the best few are then measured through an injected `confirm` callable
(the real Triton server, confirm.py), and the answer is phrased like Model Analyzer's summary
(phrasing.py).

Like with like: a confirmation measures a configuration at its own predicted rate, or lower when
the load generator could not offer it (confirm.GENERATOR_STEPS). Two measured rates are compared
only when both ran at the same share of their asked rate (a rate the generator fell back to
says nothing of the server's limit); otherwise the answer says they are not compared, and the
confirmed configurations keep the order of their predictions.
"""

from __future__ import annotations

from dataclasses import replace

from backend.errors import UserError
from backend.serving.evidence import (
    Candidate,
    Confirm,
    Evidence,
    MeasuredVariant,
    Recommendation,
    Trial,
)
from backend.serving.phrasing import comparable, phrase
from backend.serving.ranking import policy_grid
from backend.serving.simulate import RANKING_REQUESTS, SIMULATED_REQUESTS, simulate
from backend.serving.types import (
    BatchingPolicy,
    LoadPoint,
    LoadSpec,
    Scenario,
)

BISECTION_STEPS = 7  # capacity / 128: finer than the run-to-run noise of a real server
CONFIRM_TOP = 3
# Confirmed below the predicted edge: at the exact edge a p99 flips on run-to-run noise, on the
# real server as in a longer simulation.
CONFIRM_HEADROOM = 0.9
CONFIRM_DURATION_S = 5.0


def default_policy(max_batch_size: int = 32) -> BatchingPolicy:
    """Triton without a dynamic_batching block, one instance: what the gain is measured against."""
    return BatchingPolicy(max_batch_size=max_batch_size, dynamic_batching=False)


def _server(rate: float, seed: int) -> LoadSpec:
    return LoadSpec(Scenario.SERVER, target_rps=max(rate, 1e-3), seed=seed)


def best_rate(candidate: Candidate, slo_p99_ms: float, seed: int = 0) -> Evidence:
    """Bisect the Server rate for the highest one whose predicted p99 meets the bound."""
    curve, policy = candidate.variant.curve, candidate.policy
    capacity = simulate(
        curve, LoadSpec(Scenario.OFFLINE, seed=seed), policy, requests=RANKING_REQUESTS
    ).achieved_rps
    low, high = 0.0, capacity
    light = simulate(curve, _server(capacity * 0.05, seed), policy, requests=RANKING_REQUESTS)
    best: LoadPoint | None = None
    saturated = True  # until a faster rate is refused for its p99 alone: capacity limits it
    if light.stable and light.latency.p99 <= slo_p99_ms:
        low, best = capacity * 0.05, light
        for _ in range(BISECTION_STEPS):
            middle = (low + high) / 2
            point = simulate(curve, _server(middle, seed), policy, requests=RANKING_REQUESTS)
            if point.stable and point.latency.p99 <= slo_p99_ms:
                low, best = middle, point
            else:  # the nearest rate refused says why: its queue grew, or its p99 passed
                high, saturated = middle, not point.stable
    if best is None:
        return Evidence(candidate, 0.0, light)
    return Evidence(candidate, low, best, saturated=saturated)


def _predicted_rate(evidence: Evidence) -> float:
    """The rate its prediction quotes (achieved at the bisected rate): what ranks it."""
    return evidence.predicted.achieved_rps if evidence.rate_rps > 0 else 0.0


def _beats(default: Evidence, best: Evidence, slo_p99_ms: float, min_rps: float) -> bool:
    """The measured default meets the bound at a higher rate than the pick, measured alike."""
    return (
        default.measured is not None
        and comparable(default, best)
        and default.meets(slo_p99_ms, min_rps)
        and default.point.achieved_rps > best.point.achieved_rps
    )


def _confirm(evidence: Evidence, confirm: Confirm, seed: int, duration_s: float) -> Evidence:
    """Measure a candidate at its predicted rate on the real server."""
    rate = (evidence.rate_rps or evidence.predicted.spec.target_rps or 1.0) * CONFIRM_HEADROOM
    load = LoadSpec(Scenario.SERVER, target_rps=rate, duration_s=duration_s, seed=seed)
    candidate = evidence.candidate
    measured = confirm(Trial(candidate, load))
    expected = simulate(  # the prediction at the rate and with the senders really measured
        candidate.variant.curve,
        measured.spec,
        candidate.policy,
        requests=SIMULATED_REQUESTS,
        senders=measured.generator_processes,
    )
    return Evidence(candidate, evidence.rate_rps, evidence.predicted, measured, rate, expected)


def recommend(
    variants: list[MeasuredVariant],
    slo_p99_ms: float,
    *,
    min_rps: float = 0.0,
    policies: list[BatchingPolicy] | None = None,
    confirm: Confirm | None = None,
    confirm_top: int = CONFIRM_TOP,
    confirm_duration_s: float = CONFIRM_DURATION_S,
    seed: int = 0,
) -> Recommendation:
    """Predict all variant x policy configurations, confirm the best few, phrase the answer."""
    if slo_p99_ms <= 0:
        raise UserError("The p99 bound must be a positive number of milliseconds.")
    if not variants:
        raise UserError("No measured variant to serve; run a sweep with several batch sizes first.")
    policies = policies or recommendation_grid()
    candidates = [Candidate(v, p) for v in variants for p in servable(v, policies)]
    predicted = [best_rate(c, slo_p99_ms, seed) for c in candidates]
    predicted.sort(key=lambda e: (-_predicted_rate(e), e.predicted.latency.p99))
    top, closest_only = _to_confirm(predicted, min_rps, confirm_top, confirm is not None)
    measurements = 0
    if confirm is not None:
        top = [_confirm(e, confirm, seed, confirm_duration_s) for e in top]
        measurements = len(top)
    # confirmed or not, by prediction: measured rates from different generator steps do not rank
    top.sort(key=lambda e: (not e.meets(slo_p99_ms, min_rps), -_predicted_rate(e)))
    best = top[0] if top and top[0].meets(slo_p99_ms, min_rps) else None
    default = None
    closest = None
    if best is not None:
        default, confirmed = _default_of(best, top, predicted, slo_p99_ms, seed)
        if confirm is not None and not confirmed and default.rate_rps > 0:
            default = _confirm(default, confirm, seed, confirm_duration_s)
            measurements += 1
            if _beats(default, best, slo_p99_ms, min_rps):
                best = default  # measured, no policy did better than Triton without batching
    else:
        pool = top or predicted
        closest = min(pool, key=lambda e: e.point.latency.p99)
    ranked = top + [e for e in predicted if e.candidate not in {t.candidate for t in top}]
    if default is not None:  # the default's row is the default itself, confirmed or not
        ranked = [default if e.candidate == default.candidate else e for e in ranked]
    rec = Recommendation(
        slo_p99_ms,
        min_rps,
        best,
        closest,
        default,
        measurements,
        len(candidates),
        ranked,
        asked=tuple(policies),
        confirmed_closest=closest_only and measurements > 0,
    )
    return _phrased(rec)


def _phrased(rec: Recommendation) -> Recommendation:
    """With its verdict, the sentences it rests on, and both as the CLI's one paragraph."""
    verdict, details = phrase(rec, "no dynamic batching, one instance")
    sentence = " ".join((verdict, *details))
    return replace(rec, sentence=sentence, verdict=verdict, details=details)


def _to_confirm(
    predicted: list[Evidence], min_rps: float, count: int, confirming: bool
) -> tuple[list[Evidence], bool]:
    """The best few predicted to meet the bound; where none is and a confirmation was asked,
    the few closest to it (lowest predicted p99), so `--confirm N` still measures N on the
    server instead of nothing (a prediction that misses may be the prediction's error). The
    flag says the second: those were measured although predicted to miss."""
    top = [e for e in predicted if e.rate_rps >= max(min_rps, 1e-9)][:count]
    if top or not confirming:
        return top, False
    return sorted(predicted, key=lambda e: e.point.latency.p99)[:count], True


def _is_default(candidate: Candidate, variant: MeasuredVariant) -> bool:
    """Served as Triton's default on that variant: no dynamic batching, one instance (without
    dynamic batching the max batch changes nothing: each request runs alone)."""
    policy = candidate.policy
    return (
        candidate.variant == variant
        and not policy.dynamic_batching
        and policy.instance_count == 1
        and not policy.preserve_ordering
    )


def _default_of(
    best: Evidence, top: list[Evidence], predicted: list[Evidence], slo_p99_ms: float, seed: int
) -> tuple[Evidence, bool]:
    """The default on the best's variant, and whether it is already confirmed: the ranked row
    when the grid holds it (one row, not a copy beside it), else predicted on its own."""
    variant = best.candidate.variant
    for pool, confirmed in ((top, True), (predicted, False)):
        found = next((e for e in pool if _is_default(e.candidate, variant)), None)
        if found is not None:
            return found, confirmed
    base = Candidate(variant, default_policy(best.candidate.policy.max_batch_size))
    return best_rate(base, slo_p99_ms, seed), False


def servable(variant: MeasuredVariant, policies: list[BatchingPolicy]) -> list[BatchingPolicy]:
    """The policies as this variant can really be served and predicted, in order, once each: a
    file with a fixed batch size is served without dynamic batching (repository.plan_model), no
    max batch passes the largest batch size measured (past it nothing is known), and one
    instance stands for more where how they share the host was not measured (a sweep times one
    session at a time, which may already use every core: nothing says a second one adds any)."""
    largest = variant.curve.largest_batch
    fitted = []
    for policy in policies:
        if policy.instance_count > 1 and not variant.curve.instances_measured:
            policy = replace(policy, instance_count=1)
        if not variant.batchable:
            policy = BatchingPolicy(1, dynamic_batching=False, instance_count=policy.instance_count)
        elif policy.dynamic_batching and policy.max_batch_size > largest:
            preferred = tuple(size for size in policy.preferred_batch_sizes if size <= largest)
            policy = replace(policy, max_batch_size=largest, preferred_batch_sizes=preferred)
        fitted.append(policy)
    return list(dict.fromkeys(fitted))


def recommendation_grid(instance_counts: tuple[int, ...] = (1, 2)) -> list[BatchingPolicy]:
    """A compact grid for the recommendation: each policy costs a bisection of simulations."""
    return policy_grid(
        max_batch_sizes=(8, 16, 32),
        delays_us=(0, 500, 2000),
        instance_counts=instance_counts,
        with_preferred=False,
    )
