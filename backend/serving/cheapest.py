"""The cheapest serving configuration that meets the bound, the runner-up and what it saves.

Each configuration (runtime x precision x batching x instances x target) is priced at the load
that meets the bound: its highest rate with p99 within the bound (predicted, or measured where it
was confirmed on the server, or measured by a serving study). Cost per million inferences =
price per hour of its hardware / (inferences per second x 3600) x 1e6; a request of n samples is
n inferences. A configuration that misses the bound, or has no price, is never the cheapest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from backend import pricing
from backend.counts import counted
from backend.serving.phrasing import predicted_words
from backend.serving.recommend import Evidence, MeasuredVariant, Recommendation, comparable
from backend.serving.types import LoadPoint


@dataclass(frozen=True)
class Priced:
    """One configuration at the load that meets the bound, with its price."""

    label: str
    rate_rps: float  # the rate that meets the bound: predicted, or measured where it was
    point: LoadPoint  # at that rate: its p99 and samples per request
    basis: str  # "predicted", "measured at 90% of the rate asked", "measured on Triton"
    price: pricing.Price
    evidence: Evidence | None = None  # the recommendation's, where it came from one

    @property
    def inferences_per_s(self) -> float:
        return self.rate_rps * self.point.spec.samples_per_request

    @property
    def cost(self) -> float:
        found = pricing.cost_per_million(self.price.per_hour, self.inferences_per_s)
        return float("inf") if found is None else found

    @property
    def facts(self) -> str:
        """p99, rate and how it was obtained, and the price: the numbers behind the cost."""
        return (
            f"p99 {self.point.latency.p99:.2f} ms at {self.rate_rps:,.0f} req/s "
            f"{self.basis}, {self.price.text}"
        )


@dataclass(frozen=True)
class CostAnswer:
    """The cheapest configuration meeting the bound and the runner-up, as one sentence."""

    cheapest: Priced | None
    runner_up: Priced | None
    sentence: str
    unpriced: tuple[str, ...] = ()  # configurations meeting the bound with no price


def with_prices(variants: list[MeasuredVariant], prices: pricing.Prices) -> list[MeasuredVariant]:
    """Each variant priced by its cluster target, else its provider (prices: the job's or an
    override; empty: OPTIBOARD_PRICE_PER_HOUR)."""
    table = pricing.or_default(prices)
    return [replace(v, price=pricing.price_for(table, v.provider, v.target)) for v in variants]


def bound_words(slo_p99_ms: float, min_rps: float) -> str:
    words = f"p99 <= {slo_p99_ms:g} ms"
    return words + (f" at >= {min_rps:g} req/s" if min_rps else "")


def answer(
    priced: list[Priced], slo_p99_ms: float, min_rps: float, unpriced: tuple[str, ...] = ()
) -> CostAnswer:
    """Cheapest first; the sentence a manager can forward, numbers included."""
    bound = bound_words(slo_p99_ms, min_rps)
    # ties keep the order given (the recommendation's ranking), so a tie names its pick
    ranked = sorted(priced, key=lambda p: (p.cost, -p.rate_rps))
    if not ranked:
        why = (
            f"no price applies to {', '.join(unpriced[:3])}; add one with --price or "
            "OPTIBOARD_PRICE_PER_HOUR (e.g. cpu=0.40,cuda=3.50)"
            if unpriced
            else f"no configuration meets {bound}"
        )
        return CostAnswer(None, None, f"No cheapest configuration: {why}.", unpriced)
    best = ranked[0]
    sentence = (
        f"The cheapest configuration that meets {bound} is {best.label}, at "
        f"{pricing.dollars(best.cost)} per million inferences ({best.facts})"
    )
    second = ranked[1] if len(ranked) > 1 else None
    if second is None:
        sentence += "; no other configuration meets the bound"
    else:
        extra = second.cost - best.cost
        more = (
            f"{pricing.dollars(extra)} more per million, {extra / best.cost * 100:.0f}% more"
            if best.cost > 0 and extra / best.cost >= 0.005
            else "the same to within 0.5%"
        )
        sentence += (
            f"; the runner-up, {second.label}, costs {pricing.dollars(second.cost)} per million "
            f"({more}; {second.facts})"
        )
    return CostAnswer(best, second, sentence + ".", unpriced)


def recommendation_cost(rec: Recommendation) -> CostAnswer:
    """The cheapest of the recommendation's configurations that meet its bound."""
    seen: dict[object, Evidence] = {}
    for evidence in [*rec.ranked, *([rec.default] if rec.default else [])]:
        kept = seen.get(evidence.candidate)  # the grid may hold the default predicted too
        if kept is None or (kept.measured is None and evidence.measured is not None):
            seen[evidence.candidate] = evidence
    meeting = [e for e in seen.values() if e.meets(rec.slo_p99_ms, rec.min_rps)]
    # like with like: measured rates (confirmed on the server) are not ranked against predicted
    # ones; where some were measured, the answer is among those, as the verdict's is: a
    # predicted one was named cheapest beside a measured "none meets the bound"
    predicted_only = [e for e in meeting if e.measured is None]
    if rec.measurements:
        meeting = [e for e in meeting if e.measured is not None]
    priced = [
        Priced(e.candidate.label, rate_of(e), e.point, _basis(e), e.candidate.variant.price, e)
        for e in meeting
        if e.candidate.variant.price is not None
    ]
    unpriced = tuple(
        dict.fromkeys(e.candidate.variant.label for e in meeting if not e.candidate.variant.price)
    )
    found = answer(priced, rec.slo_p99_ms, rec.min_rps, unpriced)
    if rec.measurements and not meeting:
        return replace(found, sentence=_none_measured(rec, len(predicted_only)))
    first, second = found.cheapest, found.runner_up
    if first and second and first.evidence and second.evidence:
        if not comparable(first.evidence, second.evidence):  # the generator fell back unevenly
            note = (
                " The two rates were not measured alike (the load generator fell back to a "
                "different share of the rate asked), so the difference is not a like-for-like "
                "comparison."
            )
            return replace(found, sentence=found.sentence + note)
    return found


def _none_measured(rec: Recommendation, predicted_only: int) -> str:
    """No cheapest where nothing measured on the server meets the bound, and the predicted
    ones that would, counted apart and labelled predicted (never priced beside the verdict)."""
    measured = {
        e.candidate for e in [*rec.ranked, *([rec.default] if rec.default else [])] if e.measured
    }
    bound = bound_words(rec.slo_p99_ms, rec.min_rps)
    verdict = (
        f"the one configuration measured on Triton does not meet {bound}"
        if len(measured) == 1
        else f"none of the {counted(len(measured), 'configuration')} measured on Triton meets "
        f"{bound}"
    )
    sentence = f"No cheapest configuration: {verdict}"
    if predicted_only:
        were = "is" if predicted_only == 1 else "are"
        sentence += (
            f"; {predicted_only} more {were} only predicted to meet it, not measured (a larger "
            "--confirm measures them)"
        )
    return sentence + "."


def _basis(evidence: Evidence) -> str:
    """How its rate was obtained, short: the recommendation's sentence says the detail."""
    return "measured on Triton" if evidence.measured else predicted_words(evidence)


def rate_of(evidence: Evidence) -> float:
    """The rate a configuration meets the bound at, the one its sentence and tables quote: the
    rate achieved, measured where it was confirmed on the server, else predicted."""
    return evidence.rate


def evidence_cost(evidence: Evidence) -> float | None:
    """Dollars per million inferences at the rate under the bound; None when unpriced or when
    no rate meets the bound."""
    price = evidence.candidate.variant.price
    if price is None or rate_of(evidence) <= 0:
        return None
    per_request = evidence.point.spec.samples_per_request
    return pricing.cost_per_million(price.per_hour, rate_of(evidence) * per_request)


def study_cost(
    measured: dict[str, list[LoadPoint]], slo_p99_ms: float, price: pricing.Price | None
) -> CostAnswer:
    """A serving study's configurations (label -> measured points) priced at their highest
    measured rate within the bound (stable, the load generator keeping up)."""
    priced, unpriced = [], []
    for label, points in measured.items():
        meeting = [
            p
            for p in points
            if p.stable and not p.generator_saturated and p.latency.p99 <= slo_p99_ms
        ]
        if not meeting:
            continue
        best = max(meeting, key=lambda p: p.achieved_rps)
        if price is None:
            unpriced.append(label)
        else:
            priced.append(Priced(label, best.achieved_rps, best, "measured on Triton", price))
    return answer(priced, slo_p99_ms, 0.0, tuple(unpriced))
