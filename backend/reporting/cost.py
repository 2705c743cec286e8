"""Cost per million inferences in the results frame, and the cheapest configuration of a sweep.

Every row is priced by its own job's stored prices (SweepSpec.prices), or by a table the page or
the command line gives instead. Only a result that ran and computed the right outputs is priced:
a failed one or one with wrong outputs gets no cost, so it is never the cheapest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from backend import pricing
from backend.knobs.serialize import field_from_json
from backend.records import JobKind, JobRow
from backend.reporting import front
from backend.results import ResultStatus
from backend.specs import SweepSpec

if TYPE_CHECKING:  # imported where a frame is read: the CLI's start needs only job_prices
    import pandas as pd

COST_COLUMNS = ("price_per_hour", "priced_as", "cost_per_million")


def job_prices(job: JobRow | None) -> pricing.Prices:
    """The prices a sweep was queued with (older sweeps: OPTIBOARD_PRICE_PER_HOUR); only that
    field of the stored spec is read, and checked as SweepSpec checks it."""
    sweep = job is not None and job.kind == JobKind.SWEEP
    stored = field_from_json(SweepSpec, job.spec, "prices") if sweep else ()
    return pricing.or_default(pricing.checked(stored) if stored else ())


def row_cost(
    prices: pricing.Prices, provider: str, target: str, throughput: float | None, ok: bool
) -> dict[str, object]:
    """One configuration's price and cost per million inferences (None where it has none)."""
    price = pricing.price_for(prices, provider, target or "")
    return {
        "price_per_hour": price.per_hour if price else None,
        "priced_as": price.name if price else None,
        "cost_per_million": (
            pricing.cost_per_million(price.per_hour, throughput) if price and ok else None
        ),
    }


def reprice(frame: pd.DataFrame, prices: pricing.Prices) -> pd.DataFrame:
    """The frame with every row priced by `prices` (a page's or the CLI's override)."""
    out = frame.copy()
    rows = [
        row_cost(
            prices,
            str(r.provider),
            str(r.target or "") if isinstance(r.target, str) else "",
            r.throughput,
            r.status == ResultStatus.OK.value,
        )
        for r in out.itertuples()
    ]
    for column in COST_COLUMNS:
        out[column] = [row[column] for row in rows]
    return _numeric(out)


def _numeric(frame: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    for column in ("price_per_hour", "cost_per_million"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def unpriced_targets(frame: pd.DataFrame) -> list[str]:
    """The targets of measured configurations that the prices do not name: their cost is
    empty, and the cost chart and the cheapest sentence leave them out."""
    bare = frame[(frame["status"] == ResultStatus.OK.value) & frame["price_per_hour"].isna()]
    pairs = zip(bare["target"], bare["provider"], strict=True)
    return sorted({t if isinstance(t, str) and t else p for t, p in pairs})


def rate_text(value: float) -> str:
    """79,972 or 45.7 or 0.412: whole numbers with separators where the decimals say nothing."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


@dataclass(frozen=True)
class Cheapest:
    """The cheapest ok configuration and the runner-up, with the sentence that says so."""

    label: str
    cost: float
    runner_up: str | None
    runner_up_cost: float | None
    sentence: str


def cheapest(frame: pd.DataFrame, model: str | None = None) -> Cheapest | None:
    """The lowest cost per million among ok results (never wrong outputs or failed) whose
    measurement was stable, and the runner-up among those; where only unstable ones are priced,
    among those, and the sentence says so. Where unstable results are priced too, the sentence
    says it ranks stable ones only and names each unstable one cheaper than the runner-up as
    left out: its throughput (so its cost) moved while it was measured. None when none priced.
    `model` leads the sentence where each model has its own ("For cnn, the cheapest ...")."""
    ok = frame[(frame["status"] == ResultStatus.OK.value) & np.isfinite(frame["cost_per_million"])]
    if ok.empty:
        return None
    steady = ok["stable"].eq(True)
    pool = ok[steady] if steady.any() else ok
    ranked = pool.sort_values(["cost_per_million", "result_id"], kind="stable")
    best = ranked.iloc[0]
    second = ranked.iloc[1] if len(ranked) > 1 else None
    among = " among stable measurements" if steady.any() and not steady.all() else ""
    lead = f"For {model}, the cheapest" if model is not None else "The cheapest"
    sentence = (
        f"{lead} configuration is {best['label']} at "
        f"{pricing.dollars(best['cost_per_million'])} per million inferences "
        f"({rate_text(best['throughput'])} samples/s measured, ${best['price_per_hour']:g}/h for "
        f"{best['priced_as']}){among}"
    )
    caveat = _stability_caveat(ok, steady, best if second is None else second, second is None)
    if second is None:
        return Cheapest(
            best["label"], float(best["cost_per_million"]), None, None, sentence + "." + caveat
        )
    extra = second["cost_per_million"] - best["cost_per_million"]
    share = extra / best["cost_per_million"] * 100 if best["cost_per_million"] else 0.0
    sentence += (
        f"; the runner-up, {second['label']}, costs {pricing.dollars(second['cost_per_million'])}"
        f" ({pricing.dollars(extra)} or {share:.0f}% more)."
    )
    return Cheapest(
        best["label"],
        float(best["cost_per_million"]),
        str(second["label"]),
        float(second["cost_per_million"]),
        sentence + caveat,
    )


def cheapest_sentences(frame: pd.DataFrame) -> list[str]:
    """The cheapest sentence, or one per model where the frame holds several ("For cnn, the
    cheapest configuration is ..."): an MLP's configuration is no cheaper alternative to a
    CNN's (the walkthrough's jobs=1,2 picked the MLP over the CNN)."""
    models = list(frame.groupby("model_id", sort=False, dropna=False))
    several = len(models) > 1
    found_each = [
        cheapest(rows, str(rows["model"].iloc[0]) if several else None) for _, rows in models
    ]
    return [found.sentence for found in found_each if found is not None]


NAMED = 3  # unstable results named one by one in the cheapest sentence; more are counted


def _stability_caveat(ok: pd.DataFrame, steady: pd.Series, bar: pd.Series, pick: bool) -> str:
    """The sentence after the ranking: nothing, the unstable results cheaper than `bar` (the
    runner-up, or the pick when there is none) left out with their costs, or that every priced
    measurement was unstable."""
    if not steady.any():
        return (
            " Every priced measurement was unstable, so this ranking may not hold: re-run on a "
            "quiet host before relying on it."
        )
    cheaper = ok[~steady & (ok["cost_per_million"] < bar["cost_per_million"])]
    if cheaper.empty:
        return ""
    cheaper = cheaper.sort_values(["cost_per_million", "result_id"], kind="stable")
    named = [
        f"{r['label']} at {pricing.dollars(r['cost_per_million'])}" for _, r in cheaper.iterrows()
    ]
    more = f" (and {len(named) - NAMED} more)" if len(named) > NAMED else ""
    its, it = ("its", "it") if len(named) == 1 else ("their", "them")
    than = "pick" if pick else "runner-up"
    return (
        f" Left out as unstable, though measured cheaper than the {than}: "
        f"{', '.join(named[:NAMED])}{more}; {its} throughput, so {its} cost, moved while "
        f"measured: re-run {it} on a quiet host."
    )


def add_cost_pareto(frame: pd.DataFrame, cost_key: str) -> pd.DataFrame:
    """Columns `cost_pareto`: on the cost (or energy), speed and accuracy front, each figure read
    its registered way, of ok results with stable measurements only (wrong outputs carry no
    cost; an unstable one's cost moved while measured); `beyond_cost_pareto`: unstable results
    that measured beyond it (front.py).
    Each model has its own front: an MLP's cheap rows do not push a CNN's off it (the walkthrough's
    MLP-and-CNN front held the MLP alone), as the accuracy/speedup front (front.each_front)."""
    on, beyond = front.each_front(frame, (cost_key, *front.COST_FRONT))
    return frame.assign(cost_pareto=on, beyond_cost_pareto=beyond)
