"""The Compare page's speedup table for sweep jobs, as text: `optiboard compare` prints it, and
`optiboard show` and `run` print its cheapest-configuration sentence for one job.

Read from the same results frame the page reads (frames.results_frame), priced again by a --price
table like the page's price override, with speedups against the page's default baseline (each
job's own first FP32 series, speedups_each_job) and the page's "What ran" lines
(exports.what_ran_in).
"""

from __future__ import annotations

import pandas as pd

from backend import pricing
from backend.reporting import cost, exports, frames, price_mix
from backend.reporting.metrics import REGISTRY as METRICS
from backend.reporting.metrics import cell, pick
from backend.reporting.text import EVAL_NOTE, TOP1_NOTE, no_cost_line, table
from backend.results import GAP, ResultStatus, StoredResult
from storage.repo.results import list_results

FIGURES = pick(
    "p50_ms", "p99_ms", "throughput", "cost_per_million", "speedup", "cosine_similarity",
    "top1_agreement",
)  # fmt: skip
EVAL_TOP1 = METRICS["eval_top1_accuracy"]
SPEEDUP_AT = [m.key for m in FIGURES].index("speedup") + 1  # firm follows it, as on the page
FIRM = "firm"  # the speedup is a firm figure (frames.add_speedups): FIRM_NOTE
HEADERS = [
    "job", "label", "precision", "provider", "batch",
    *(m.cli_header for m in FIGURES[:SPEEDUP_AT]), FIRM,
    *(m.cli_header for m in FIGURES[SPEEDUP_AT:]),
]  # fmt: skip
EACH_JOB = "each job's own first measured FP32 series (a job without FP32: its model's first)"
FIRM_NOTE = (
    f"{FIRM}: the speedup is a firm figure: this row and the baseline row it divides by both "
    f"measured stable, and its median-call speedup and its throughput ratio agree within {GAP:g}x."
)


def priced_frame(job_ids: list[int], prices: pricing.Prices = ()) -> pd.DataFrame:
    """The jobs' results frame, priced by `prices` when given (else by each job's own)."""
    frame = frames.results_frame(job_ids=job_ids)
    return cost.reprice(frame, prices) if prices else frame


def cheapest_sentence(frame: pd.DataFrame) -> str | None:
    """The cheapest stable configuration and the runner-up, as the page says it, one sentence
    per model where the jobs span several (None: nothing priced)."""
    return " ".join(cost.cheapest_sentences(frame)) or None


def baseline_of(frame: pd.DataFrame) -> str | None:
    """The page's default baseline: the first FP32 series among the measured configurations."""
    measured = frame[frame["status"] == ResultStatus.OK.value]
    return next((s for s in dict.fromkeys(measured["series"]) if "FP32" in s), None)


def speedups_each_job(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Speedups of each job's rows against that job's own first FP32 series, or, for a job that
    measured no FP32, its model's first (two jobs of one MLP: the second job's b16 and b64 were
    divided by the first job's FP32, which ran b1 and b8 only, and had no speedup; a CNN's rows
    divided by an MLP's baseline had none at all), and those baselines: the default of
    `optiboard compare`, of the Compare page and of its HTML report."""
    if frame.empty:
        return frames.add_speedups(frame, None), []
    baselines = each_job_baselines(frame)
    parts = []
    for _, rows in frame.groupby("model_id", sort=False, dropna=False):  # each model's own
        for job_id in dict.fromkeys(rows["job_id"]):
            own = rows["job_id"] == job_id  # the fallback's rows are the model's, so all of them
            parts.append(frames.add_speedups(rows, baselines.get(job_id))[own])
    return pd.concat(parts).sort_index(), list(dict.fromkeys(baselines.values()))


def each_job_baselines(frame: pd.DataFrame) -> dict[int, str]:
    """Each job's default baseline: its own first FP32 series, else its model's first (a job
    with neither is left out). The names alone, for a caption, without dividing anything."""
    found: dict[int, str] = {}
    for _, rows in frame.groupby("model_id", sort=False, dropna=False):
        fallback = baseline_of(rows)
        for job_id in dict.fromkeys(rows["job_id"]):
            baseline = baseline_of(rows[rows["job_id"] == job_id]) or fallback
            if baseline:
                found[job_id] = baseline
    return found


def _yes_no(value: object) -> str:
    return {True: "yes", False: "no"}.get(bool(value), "-") if pd.notna(value) else "-"


def _row(r: pd.Series, scored: bool) -> list[str]:
    firm = _yes_no(r["speedup_firm"]) if pd.notna(r["speedup"]) else "-"
    return [
        str(r["job_id"]),
        str(r["label"]),
        cell(r["precision"], ""),
        cell(r["provider"], ""),
        cell(r["batch_size"], ""),
        *(m.text(r[m.key]) for m in FIGURES[:SPEEDUP_AT]),
        firm,
        *(m.text(r[m.key]) for m in FIGURES[SPEEDUP_AT:]),
        *([EVAL_TOP1.text(r["eval_top1_accuracy"])] if scored else []),
        str(r["status"]),
        _yes_no(r["stable"]),
    ]


def compare_lines(job_ids: list[int], prices: pricing.Prices = ()) -> list[str]:
    """One row per configuration of the jobs, then the baseline, the cheapest configuration,
    what ran and each configuration's notes; one line when nothing is stored yet."""
    frame = priced_frame(job_ids, prices)
    if frame.empty:
        return [f"No result is stored yet for job {', '.join(map(str, job_ids))}."]
    frame, named = speedups_each_job(frame)
    scored = bool(frame["eval_top1_accuracy"].notna().any())
    headers = HEADERS + [EVAL_TOP1.cli_header] * scored + ["status", "stable"]
    lines = [table([_row(r, scored) for _, r in frame.iterrows()], headers)]
    speedup = METRICS["speedup"].cli_header
    lines.append(
        f"{speedup}: the baseline's p50 / p50 at the same batch size; baseline "
        + ("; ".join(named) if named else "none")
        + (f", {EACH_JOB}." if named else " (no FP32 measured).")
    )
    lines += [FIRM_NOTE, TOP1_NOTE] + ([EVAL_NOTE] if scored else [])
    priced = frame.dropna(subset=["price_per_hour"])
    if not priced.empty:
        rates = dict.fromkeys(zip(priced["priced_as"], priced["price_per_hour"], strict=True))
        lines.append(  # each distinct price once: jobs may have stored different ones
            f"{METRICS['cost_per_million'].cli_header}: dollars per million inferences at "
            + ", ".join(f"{name}=${rate:g}/h" for name, rate in rates)
            + " (each job's stored prices, or --price)."
        )
    if said := pricing.unpriced_sentence(cost.unpriced_targets(frame)):  # measured, no cost
        lines.append(said)
    bare = frame[frame["cost_per_million"].isna()]  # why its $/M cell reads "-"
    if said := no_cost_line(list(zip(bare["status"], bare["price_per_hour"].notna(), strict=True))):
        lines.append(said)
    if not prices and (mixed := price_mix.mixed_prices(frame, "give one with --price")):
        lines.append(mixed)
    lines += cost.cheapest_sentences(frame)  # one per model where the jobs span several
    lines += [f"ran: {line}" for line in exports.what_ran_in(frame)]
    notes = _notes(frame)
    several = frame["job_id"].nunique() > 1  # its notes compare with its own job's FP32
    why = "why (each against its own job's FP32, not the baseline above):" if several else "why:"
    return lines + ([why, *notes] if notes else [])


def _notes(frame: pd.DataFrame) -> list[str]:
    """Each configuration's "why" lines, one a line (the frame keeps them joined)."""
    ids = [int(i) for i in frame["result_id"]]
    stored = {
        r.id: r.result.notes for r in map(StoredResult.from_row, list_results(result_ids=ids))
    }
    return [f"  {r['label']}: {n}" for _, r in frame.iterrows() for n in stored[r["result_id"]]]
