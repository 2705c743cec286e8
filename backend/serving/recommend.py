"""Recommendation under a p99 bound: predict every configuration, confirm the best few for real.

A configuration is a variant (precision x provider, with its measured latency curve) and a
batching policy. Each is scored by the highest Server (Poisson) rate at which its predicted p99
stays within the bound; the best few are then measured through an injected `confirm` callable
(the real Triton server, confirm.py), and the answer is phrased like Model Analyzer's summary.

Like with like: a confirmation measures a configuration at its own predicted rate, or lower when
the load generator could not offer it (confirm.GENERATOR_STEPS). Two measured rates are compared
only when both ran at the same share of their asked rate (a rate the generator fell back to
says nothing of the server's limit); otherwise the answer says they are not compared, and the
confirmed configurations keep the order of their predictions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from backend.errors import UserError
from backend.pricing import Price
from backend.serving.ranking import policy_grid
from backend.serving.simulate import RANKING_REQUESTS, SIMULATED_REQUESTS, simulate
from backend.serving.types import (
    BatchingPolicy,
    LatencyCurve,
    LoadPoint,
    LoadSpec,
    Scenario,
)
from backend.specs import Precision

BISECTION_STEPS = 7  # capacity / 128: finer than the run-to-run noise of a real server
CONFIRM_TOP = 3
# Confirmed below the predicted edge: at the exact edge a p99 flips on run-to-run noise, on the
# real server as in a longer simulation.
CONFIRM_HEADROOM = 0.9
CONFIRM_DURATION_S = 5.0


@dataclass(frozen=True)
class MeasuredVariant:
    """One optimized model variant and its measured latency-vs-batch curve: what the ranking
    weighs (engine.variants.Variant is the built file; study.ServedVariant a study's file)."""

    precision: str
    provider: str
    curve: LatencyCurve
    model_path: str = ""  # the ONNX file a real server would load (needed to confirm)
    target: str = ""  # the cluster target its sweep ran on; empty: this machine
    runtime: str = "onnxruntime"
    price: Price | None = None  # per hour of its hardware (backend.pricing); None: not priced
    # False: its files have the batch size baked in (a fixed-shape sweep), so Triton cannot
    # stack requests (repository.plan_model serves such a file as a fixed-batch server)
    batchable: bool = True
    # what the curve rests on, in words, for the sentence ("" where it was measured on Triton)
    rests_on: str = ""

    @property
    def label(self) -> str:
        try:
            precision = Precision(self.precision).label
        except ValueError:
            precision = self.precision
        runtime = "" if self.runtime == "onnxruntime" else f"{self.runtime} "
        where = f" @ {self.target}" if self.target else ""
        return f"{runtime}{precision} on {self.provider.upper()}{where}"


@dataclass(frozen=True)
class Candidate:
    """A configuration to serve: a variant and a batching policy."""

    variant: MeasuredVariant
    policy: BatchingPolicy

    @property
    def label(self) -> str:
        return f"{self.variant.label}, {self.policy.label}"


@dataclass(frozen=True)
class Trial:
    """What `confirm` is asked to measure: this candidate under this load."""

    candidate: Candidate
    load: LoadSpec


Confirm = Callable[[Trial], LoadPoint]


@dataclass(frozen=True)
class Evidence:
    """A candidate's best rate under the bound, predicted and (for the best few) measured."""

    candidate: Candidate
    rate_rps: float  # highest predicted Server rate meeting the bound; 0 when none does
    predicted: LoadPoint  # at rate_rps (or at the lightest probed rate when none meets)
    measured: LoadPoint | None = None
    asked_rps: float = 0.0  # the Server rate the confirmation asked for
    expected: LoadPoint | None = None  # the prediction at the load really measured

    @property
    def share(self) -> float:
        """The share of the asked rate the measurement ran at (1.0: as asked; less: the load
        generator fell back to a lower rate); 1.0 when nothing was measured."""
        if self.measured is None or not self.asked_rps:
            return 1.0
        return round((self.measured.spec.target_rps or 0.0) / self.asked_rps, 2)

    @property
    def basis(self) -> str:
        """How its rate was obtained, in words; two rates are compared only on the same basis."""
        if self.measured is None:
            return "predicted"
        if self.measured.generator_saturated:
            return "measured with the load generator behind"
        return f"measured at {self.share:.0%} of the rate asked"

    @property
    def point(self) -> LoadPoint:
        """The measurement when there is one, else the prediction."""
        return self.measured or self.predicted

    @property
    def rate(self) -> float:
        """Its one rate, quoted everywhere (sentence, tables, cost): the rate achieved at its
        point, measured where it was confirmed, else predicted; 0 when no rate meets the bound.
        (rate_rps is the offered rate the bisection found, an input of that point.)"""
        if self.measured is None and self.rate_rps <= 0:
            return 0.0
        return self.point.achieved_rps

    def meets(self, slo_p99_ms: float, min_rps: float) -> bool:
        """Within the bound: a predicted point in steady state, or a server measurement the
        generator kept up with (perf_analyzer's window verdict is shown, not required: on a
        shared host it flaps with the neighbours while the p99 is what the bound is about)."""
        point = self.point
        steady = not point.generator_saturated if self.measured else point.stable
        return (
            self.rate_rps > 0
            and steady
            and point.latency.p99 <= slo_p99_ms
            and point.achieved_rps >= min_rps
        )


@dataclass(frozen=True)
class Recommendation:
    """The answer, its sentence and the evidence behind it (best first)."""

    slo_p99_ms: float
    min_rps: float
    best: Evidence | None
    closest: Evidence | None  # when nothing meets the bound: the lowest p99 seen
    default: Evidence | None  # no dynamic batching, one instance, on the best's variant
    measurements: int
    configurations: int
    ranked: list[Evidence] = field(default_factory=list)
    sentence: str = ""
    asked: tuple[BatchingPolicy, ...] = ()  # the policy grid, before each variant's limits


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
    if light.stable and light.latency.p99 <= slo_p99_ms:
        low, best = capacity * 0.05, light
        for _ in range(BISECTION_STEPS):
            middle = (low + high) / 2
            point = simulate(curve, _server(middle, seed), policy, requests=RANKING_REQUESTS)
            if point.stable and point.latency.p99 <= slo_p99_ms:
                low, best = middle, point
            else:
                high = middle
    if best is None:
        return Evidence(candidate, 0.0, light)
    return Evidence(candidate, low, best)


def _predicted_rate(evidence: Evidence) -> float:
    """The rate its prediction quotes (achieved at the bisected rate): what ranks it."""
    return evidence.predicted.achieved_rps if evidence.rate_rps > 0 else 0.0


def comparable(first: Evidence, second: Evidence) -> bool:
    """Rates obtained the same way: both predicted, or both measured at the same share of their
    asked rate with the load generator keeping up (then each is its own server's)."""
    saturated = "load generator behind" in first.basis
    return first.basis == second.basis and not saturated


def _beats(default: Evidence, best: Evidence, slo_p99_ms: float, min_rps: float) -> bool:
    """The measured default meets the bound at a higher rate than the pick, measured alike."""
    return (
        default.measured is not None
        and comparable(default, best)
        and default.meets(slo_p99_ms, min_rps)
        and default.point.achieved_rps > best.point.achieved_rps
    )


def _lead(rec: Recommendation) -> str:
    """Model Analyzer's opening: how many measurements on how many configurations."""
    if not rec.measurements:
        return f"In {rec.configurations} predicted configurations (none measured on the server yet)"
    measured = [e for e in [*rec.ranked, rec.default] if e is not None and e.measured]
    served = len({e.candidate for e in measured})
    runs = "measurement" if rec.measurements == 1 else "measurements"
    configurations = "configuration" if served == 1 else "configurations"
    return (
        f"In {rec.measurements} {runs} across {served} {configurations} "
        f"(the best of {rec.configurations} predicted)"
    )


def _sentence(rec: Recommendation, default_label: str) -> str:
    caveats = " ".join(_caveats(rec))
    return _answer(rec, default_label) + (f" {caveats}" if caveats else "")


def _caveats(rec: Recommendation) -> list[str]:
    """What a predicted answer rests on, and where it is conservative for want of a measurement:
    instances not measured are taken to add nothing, a max batch never passes the largest batch
    measured, and a file with a fixed batch size is never predicted to batch."""
    quoted = rec.best or rec.closest
    if quoted is None or quoted.measured is not None:
        return []
    variant, policy = quoted.candidate.variant, quoted.candidate.policy
    said = []
    if variant.rests_on:
        said.append(
            f"Predicted, not measured: it rests on {variant.rests_on}; no per-request CPU work "
            "of the server or the load generator is counted, which on a shared host can cap "
            "the rate far below this."
        )
    if max(p.instance_count for p in rec.asked) > 1 and not variant.curve.instances_measured:
        said.append(
            "Only one instance is predicted: how more would share this host was not measured, "
            "so none is assumed to add throughput (a serving study with two instances "
            "measures it)."
        )
    largest = variant.curve.largest_batch
    if (
        variant.batchable
        and policy.dynamic_batching
        and max(p.max_batch_size for p in rec.asked) > largest
    ):
        said.append(
            f"The max batch stops at {largest}, the largest batch size measured: beyond it the "
            "compute time is unknown (measure larger batches to predict larger ones)."
        )
    fixed = [
        v.label for v in dict.fromkeys(e.candidate.variant for e in rec.ranked) if not v.batchable
    ]
    if fixed and any(p.dynamic_batching for p in rec.asked):
        said.append(
            f"{', '.join(fixed)} {'has' if len(fixed) == 1 else 'have'} files with a fixed batch "
            "size, which Triton cannot batch, so only no dynamic batching is predicted there "
            "(a sweep with dynamic shapes gives files that batch)."
        )
    return said


def _answer(rec: Recommendation, default_label: str) -> str:
    bound = f"the p99 bound of {rec.slo_p99_ms:g} ms"
    if rec.min_rps:
        bound += f" at {rec.min_rps:g} req/s or more"
    lead = _lead(rec)
    if rec.best is None:
        closest = rec.closest
        if closest is None:
            return f"{lead}, none meets {bound}."
        p = closest.point
        source = "predicted"
        if closest.measured is not None:
            source = "measured"
            if p.generator_saturated:
                source += "; the load generator could not offer more, so not the server's limit"
        return (
            f"{lead}, none meets {bound}; the closest is {closest.candidate.label} "
            f"with p99 {p.latency.p99:.1f} ms at {p.achieved_rps:.0f} req/s ({source})."
        )
    rate = rec.best.rate
    if rec.best is rec.default:
        runner_up = next((e for e in rec.ranked if e.measured is not None), None)
        beaten = (
            f"; the best predicted policy, {runner_up.candidate.label}, measured "
            f"{runner_up.rate:.0f} req/s"
            if runner_up is not None
            else ""
        )
        return (
            f"{lead}, the default ({default_label}) is the best: "
            f"{rec.best.candidate.variant.label} meets {bound} at "
            f"{rate:.0f} req/s{beaten}{_generator_note(rec)}."
        )
    versus = f"the default ({default_label}) does not meet it at any rate"
    default = rec.default
    if default is not None and default.rate_rps > 0:
        base = default.point
        if default.measured is not None and base.generator_saturated:
            versus = (
                f"where the default ({default_label}) could not be measured: the load "
                f"generator fell behind even at {base.achieved_rps:.0f} req/s"
            )
        elif not default.meets(rec.slo_p99_ms, 0.0):
            versus = (
                f"where the default ({default_label}) missed it "
                f"(p99 {base.latency.p99:.1f} ms at {base.achieved_rps:.0f} req/s)"
            )
        elif not comparable(rec.best, default):
            versus = (
                f"and the default ({default_label}) met it at {default.rate:.0f} req/s; "
                f"not compared, the pick {rec.best.basis} and the default {default.basis}"
            )
        elif default.rate:
            gain = (rate / default.rate - 1) * 100
            more = "more" if gain >= 0 else "less"
            versus = f"{abs(gain):.0f}% {more} than the default ({default_label})"
    return (
        f"{lead}, {rec.best.candidate.label} meets {bound} at {rate:.0f} req/s, {versus}"
        f"{_generator_note(rec)}."
    )


def _generator_note(rec: Recommendation) -> str:
    """Say so when the load generator could not offer the rate a confirmation asked for."""
    measured = next((e for e in rec.ranked if e.measured is not None), None)
    unique = {id(e): e for e in (rec.best, rec.default, measured) if e is not None}
    short = [
        e for e in unique.values() if e is not None and e.measured is not None and e.share < 0.99
    ]
    if not short:
        return ""
    asked = ", ".join(f"{e.asked_rps:.0f}" for e in short)
    return (
        f" (the load generator could not offer the predicted {asked} req/s on this host, so a "
        "lower rate was measured)"
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
    top = [e for e in predicted if e.rate_rps >= max(min_rps, 1e-9)][:confirm_top]
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
        base = Candidate(
            best.candidate.variant, default_policy(best.candidate.policy.max_batch_size)
        )
        default = best if base == best.candidate else best_rate(base, slo_p99_ms, seed)
        if confirm is not None and default is not best and default.rate_rps > 0:
            default = _confirm(default, confirm, seed, confirm_duration_s)
            measurements += 1
            if _beats(default, best, slo_p99_ms, min_rps):
                best = default  # measured, no policy did better than Triton without batching
    else:
        pool = top or predicted
        closest = min(pool, key=lambda e: e.point.latency.p99)
    ranked = top + [e for e in predicted if e.candidate not in {t.candidate for t in top}]
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
    )
    label = "no dynamic batching, one instance"
    return Recommendation(**{**rec.__dict__, "sentence": _sentence(rec, label)})


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
