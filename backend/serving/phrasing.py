"""The recommendation's sentence, phrased like Model Analyzer's summary, and what a predicted
answer rests on (recommend.py decides; this says it).

Like with like: two measured rates are compared only when both ran at the same share of their
asked rate (a rate the generator fell back to says nothing of the server's limit); otherwise
the sentence says they are not compared.
"""

from __future__ import annotations

from collections.abc import Iterable

from backend.counts import counted
from backend.serving.evidence import Evidence, MeasuredVariant, Recommendation


def comparable(first: Evidence, second: Evidence) -> bool:
    """Rates obtained the same way: both predicted, or both measured at the same share of their
    asked rate with the load generator keeping up (then each is its own server's)."""
    saturated = "load generator behind" in first.basis
    return first.basis == second.basis and not saturated


def _lead(rec: Recommendation) -> str:
    """Model Analyzer's opening: how many measurements on how many configurations."""
    if not rec.measurements:
        predicted = counted(rec.configurations, "predicted configuration")
        return f"In {predicted} (none measured on the server yet)"
    measured = [e for e in [*rec.ranked, rec.default] if e is not None and e.measured]
    served = len({e.candidate for e in measured})
    runs = "measurement" if rec.measurements == 1 else "measurements"
    configurations = "configuration" if served == 1 else "configurations"
    which = (
        f"the closest of {rec.configurations} predicted, none of which was predicted to meet "
        "the bound"
        if rec.confirmed_closest
        else f"the best of {rec.configurations} predicted"
    )
    return f"In {rec.measurements} {runs} across {served} {configurations} ({which})"


def phrase(rec: Recommendation, default_label: str) -> tuple[str, tuple[str, ...]]:
    """The verdict (the answer in one sentence), then the sentences it rests on: any unstable
    measurement, what a predicted answer rests on and where it is conservative. The CLI prints
    them as one paragraph; the Serve page shows the verdict apart, the rest as a list."""
    return _answer(rec, default_label), (*_unstable(rec), *_caveats(rec))


def unstable_input(evidence: Evidence) -> str:
    """The batch sizes of unstable sweep measurements a predicted configuration rests on, in
    words ("batch size 2"); "" where none (or where it was measured on the server)."""
    sizes = evidence.candidate.unstable_inputs if evidence.measured is None else ()
    if not sizes:
        return ""
    return f"batch size{'s' if len(sizes) > 1 else ''} {', '.join(map(str, sizes))}"


def firm(evidence: Evidence) -> bool:
    """An answer to state without hedging: measured on the server with stable windows, or
    predicted from a serving study's costs (calibrated) on stable sweep measurements. A rate
    from the sweep alone, or resting on an unstable measurement, is not (the page's box says
    which by its colour)."""
    if evidence.measured is not None:
        return evidence.measured.stable and not evidence.measured.generator_saturated
    return not evidence.candidate.variant.rests_on and not unstable_input(evidence)


def _unstable(rec: Recommendation) -> list[str]:
    """Name each configuration the sentence quotes whose prediction rests on an unstable sweep
    measurement, which one, and the remedy: an unstable measurement never carries a claim
    silently (as reporting/cost.py names a cheaper unstable row). They stay ranked: every
    policy of a variant rests on the same curve, and the remedy is a steadier sweep."""
    quoted = rec.best or rec.closest
    named = [(quoted, quoted.candidate.label if quoted else "")]
    if rec.best is not None and rec.default is not None and rec.default is not rec.best:
        named.append((rec.default, "the default it is compared with"))
    said = [
        f"{label} rests on the sweep's unstable measurement of {e.candidate.variant.label} at "
        f"{unstable_input(e)}"
        for e, label in named
        if e is not None and unstable_input(e)
    ]
    if not said:
        return []
    these = "these predictions" if len(said) > 1 else "this prediction"
    return [
        f"{'; '.join(said)} (its windows disagreed or its calls stalled), so {these} may not "
        "hold: re-run the sweep on a quiet host."
    ]


def serves(variant: MeasuredVariant, differs: bool) -> str:
    """Which file a configuration's server loads and, where `differs` (the variants compared do
    not all batch alike), whether it may batch and why, in one short clause."""
    served = variant.served_file or f"the {variant.label} file"
    if not differs or not variant.batching_why:
        return served
    may = "may batch" if variant.batchable else "cannot batch"
    return f"{served}, which {may}: {variant.batching_why}"


def batching_differs(variants: Iterable[MeasuredVariant]) -> bool:
    """Whether some of these variants' files batch and others do not."""
    return len({v.batchable for v in variants}) > 1


def _caveats(rec: Recommendation) -> list[str]:
    """What a predicted answer rests on, and where it is conservative for want of a measurement:
    instances not measured are taken to add nothing, a max batch never passes the largest batch
    measured, and a file with a fixed batch size is never predicted to batch. A sweep-only
    answer's remedy is not repeated here: it is quoted, so it is ranked, so the uncalibrated
    headline (page and CLI, above this) already says it; the page's first bullet repeated it."""
    quoted = rec.best or rec.closest
    if quoted is None or quoted.measured is not None:
        return []
    variant, policy = quoted.candidate.variant, quoted.candidate.policy
    said = []
    if variant.costs_from:
        said.append(
            f"Predicted, not measured: it rests on {variant.costs_from} (per-request overhead, "
            "compute per batch size and the CPU of the server and the load generator, for this "
            "file on Triton), not on the sweep's in-process latency alone."
        )
    elif variant.rests_on:  # why it matters and what to do: the "Uncalibrated: ..." line, once
        said.append(
            f"Predicted, not measured: it rests on {variant.rests_on}; no per-request CPU work "
            "of the server or the load generator is counted, as none was measured on this host."
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
    said.extend(_files(rec, variant))
    return said


def _files(rec: Recommendation, quoted: MeasuredVariant) -> list[str]:
    """Which file each variant serves and, once, why a fixed-batch file is predicted without
    dynamic batching: in the one sentence naming each file where some batch and some do not."""
    ranked = list(dict.fromkeys(e.candidate.variant for e in rec.ranked))
    fixed = [v.label for v in ranked if not v.batchable]
    only = bool(fixed) and any(p.dynamic_batching for p in rec.asked)
    remedy = "(a sweep with dynamic shapes gives files that batch)"
    if batching_differs(ranked):  # which file each serves, why one batches and one not
        files = "; ".join(f"{v.label} serves {serves(v, True)}" for v in ranked)
        there = f"; so only no dynamic batching is predicted for {', '.join(fixed)} {remedy}"
        return [f"{files}{there if only else ''}."]
    said = []
    if only:
        said.append(
            f"{', '.join(fixed)} {'has' if len(fixed) == 1 else 'have'} files with a fixed batch "
            f"size, which Triton cannot batch, so only no dynamic batching is predicted there "
            f"{remedy}."
        )
    if quoted.served_file:
        said.append(f"Triton would serve {serves(quoted, False)}.")
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
        source = predicted_words(closest)
        if closest.measured is not None:
            source = "measured"
            if p.generator_saturated:
                source += "; the load generator could not offer more, so not the server's limit"
        return (
            f"{lead}, none meets {bound}; the closest is {closest.candidate.label} "
            f"with p99 {p.latency.p99:.1f} ms at {p.achieved_rps:,.0f} req/s ({source})."
        )
    rate = rec.best.rate
    if rec.best is rec.default:
        runner_up = next(  # never itself: the closest confirmed may be the default
            (e for e in rec.ranked if e.measured is not None and e is not rec.best), None
        )
        beaten = (
            f"; the best predicted policy, {runner_up.candidate.label}, measured "
            f"{runner_up.rate:,.0f} req/s"
            if runner_up is not None
            else ""
        )
        return (
            f"{lead}, the default ({default_label}) is the best: "
            f"{rec.best.candidate.variant.label} meets {bound} at "
            f"{rate:,.0f} req/s{_light(rec.best)}{_uncalibrated(rec.best)}{beaten}"
            f"{_generator_note(rec)}{_saturated(rec.best)}."
        )
    return (
        f"{lead}, {rec.best.candidate.label} meets {bound} at {rate:,.0f} req/s"
        f"{_light(rec.best)}{_uncalibrated(rec.best)}, {_versus(rec, rec.best, default_label)}"
        f"{_generator_note(rec)}{_saturated(rec.best)}."
    )


def _versus(rec: Recommendation, best: Evidence, default_label: str) -> str:
    """How the pick compares with Triton's default: the gain, or why there is none to say."""
    versus = f"the default ({default_label}) does not meet it at any rate"
    default = rec.default
    if default is not None and default.measured is None and rec.measurements:
        versus += " (predicted, not measured)"  # beside measured figures: said apart
    if default is not None and default.rate_rps > 0:
        base = default.point
        if default.measured is not None and base.generator_saturated:
            versus = (
                f"where the default ({default_label}) could not be measured: the load "
                f"generator fell behind even at {base.achieved_rps:,.0f} req/s"
            )
        elif not default.meets(rec.slo_p99_ms, 0.0):
            versus = (
                f"where the default ({default_label}) missed it "
                f"(p99 {base.latency.p99:.1f} ms at {base.achieved_rps:,.0f} req/s)"
            )
        elif not comparable(best, default):
            versus = (
                f"and the default ({default_label}) met it at {default.rate:,.0f} req/s; "
                f"not compared, the pick {best.basis} and the default {default.basis}"
            )
        elif default.rate:
            gain = (best.rate / default.rate - 1) * 100
            more = "more" if gain >= 0 else "less"
            versus = f"{abs(gain):.0f}% {more} than the default ({default_label})"
    return versus


def predicted_words(evidence: Evidence) -> str:
    """How a predicted figure was obtained, short, for tables and the cost sentence: a sweep's
    in-process latency alone (no serving study's costs) is uncalibrated and says so."""
    if evidence.candidate.variant.rests_on:
        return "predicted from the sweep alone, uncalibrated"
    return "predicted"


def uncalibrated_headline(rec: Recommendation) -> str:
    """The line printed above rates predicted from a sweep alone (no serving study's costs
    apply), so the caveat stands where the numbers are read, with the one action that fixes
    it (or the study of this model that exists, and why it does not apply); "" otherwise."""
    alone = [e for e in rec.ranked if e.measured is None and e.candidate.variant.rests_on]
    if not alone:
        return ""
    remedy = alone[0].candidate.variant.remedy
    return (
        "Uncalibrated: the rates below are predicted from the sweep's in-process latency alone, "
        "which leaves out the server's per-request cost (for a small model often 10-100x too "
        "high)." + (f" {remedy}" if remedy else "")
    )


def _uncalibrated(evidence: Evidence) -> str:
    """Beside a figure predicted from the sweep alone, the word that bounds it: at the number,
    not after the sentence (a tiny MLP: 40,470 req/s predicted, 1,643 served). Short: the
    "Uncalibrated: ..." line above the sentence (CLI and page) says why and what to do; said
    in full here too, the page read the same caveat four times."""
    if evidence.measured is not None or not evidence.candidate.variant.rests_on:
        return ""
    return " (predicted from the sweep alone, uncalibrated)"


def _saturated(evidence: Evidence) -> str:
    """Where the server's predicted saturation, not the bound, limits the rate, the clause that
    says so: a p99 of 7.83 ms "meeting" 10 ms at 2,267 req/s read as if the bound decided it."""
    if evidence.measured is not None or not evidence.saturated:
        return ""
    return (
        "; saturation, not the p99 bound, limits the pick's rate (offered more, the server is "
        "predicted to fall behind)"
    )


def _light(best: Evidence) -> str:
    """Say so where the pick was measured only at the light load it was confirmed at: the
    prediction said no rate meets the bound, so no higher rate was searched."""
    if best.measured is None or best.rate_rps > 0:
        return ""
    return (
        " (measured at a light load only: no rate was predicted to meet the bound, so none "
        "higher was searched)"
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
    asked = " and ".join(f"{e.asked_rps:,.0f}" for e in short)
    return (
        f" (the load generator could not offer the predicted {asked} req/s on this host, so a "
        "lower rate was measured)"
    )
