"""The Compare page's HTML report, built one way for the page's "HTML report" download and for
`optiboard export --format html`: the view prepared as the page prepares it (speedups, accuracy
loss, Pareto fronts), every chart the page can draw, then exports.html_report.

The page passes its own choices (picked configurations, baseline, accuracy loss, cost axis); the
CLI passes the page's defaults for the jobs (default_html), so both files hold the same report.
What the page shows beside its charts that is no drawing lives here too, so that the page stays
thin: the sentences under the charts (chart_captions) and the speedup table's columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from backend import pricing
from backend.reporting import charts, comparison, cost, exports, frames, front
from backend.reporting.metrics import Metric, cost_axes
from backend.results import ResultStatus

CHARTS = {
    "latency": "Latency vs batch",
    "throughput": "Throughput vs batch",
    "distribution": "Latency distribution",
    "pareto": "Accuracy vs speedup",
    "cost": "Accuracy vs cost (cost/speed/accuracy Pareto)",
    "memory": "Memory",
}
DEFAULT_LOSS = "mean_rel_error"  # the page's first "Accuracy loss" choice
EACH_MODEL = "each model"  # the choice "each job's own first FP32 series" (kept in old links)
EACH_MODEL_TEXT = "Each job's own first FP32 series"  # how the page's picker writes EACH_MODEL


def baseline_text(view: pd.DataFrame, baseline: str | None) -> str | None:
    """The baseline as the page and the report name it: the series picked, or each job's
    own first FP32 series (its model's where it has none), joined (None where no model has one)."""
    if baseline is not None and baseline != EACH_MODEL:
        return baseline
    named = dict.fromkeys(comparison.each_job_baselines(view).values())  # no speedups again
    return "; ".join(named) if named else None


# the speedup table's columns: speedup right after the label and batch (batch apart: a long
# label is cut before its " b8", and then rows looked the same), then the measurement
TABLE_COLUMNS = ["label", "batch_size", "speedup", "speedup_firm", "status", "stable"]
TABLE_COLUMNS += ["p50_ms", "p90_ms", "p99_ms", "throughput", "cost_per_million"]
TABLE_COLUMNS += ["price_per_hour", "throughput_ratio", "accuracy_loss", "pareto", "peak_rss_mb"]
ENERGY_COLUMNS = ["j_per_sample", "j_per_sample_min", "j_per_sample_max"]  # backend/energy
ENERGY_COLUMNS += ["j_per_sample_above_idle", "idle_w"]
ENERGY_HEADERS = "energy (J/sample, its min and max, J/sample above idle, idle W)"


def table_columns(view: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The page's speedup table's columns, and the headers of those left out as empty in every
    row (five energy columns with nothing in them took the width speedup needed); the report's
    table is exports.REPORT_COLUMNS, its empty columns left out the same way."""
    columns = list(TABLE_COLUMNS)
    absent = []
    if view[ENERGY_COLUMNS].notna().any().any():
        columns += ENERGY_COLUMNS
    else:
        absent.append(ENERGY_HEADERS)
    for key in ("price_per_hour", "cost_per_million", "peak_rss_mb"):
        if view[key].isna().all():
            columns.remove(key)
            absent.append(frames.METRICS[key].header)
    if view["evaluation_set"].notna().any():  # task accuracy on the user's own data
        columns += ["eval_top1_accuracy", "eval_top1_agreement", "evaluation_set"]
    if view["calibration_set"].notna().any():
        columns.append("calibration_set")
    return columns, absent


def priced_axes(view: pd.DataFrame) -> list[Metric]:
    """The cost axes (money, energy per item) that have a value in `view`, money first."""
    return [m for m in cost_axes(view.columns) if view[m.key].notna().any()]


def prepared(
    view: pd.DataFrame, baseline: str | None, loss: str, cost_key: str | None
) -> pd.DataFrame:
    """Speedups against `baseline` (None or EACH_MODEL: each job's own first FP32 series, as
    `optiboard compare` divides), accuracy loss read as `loss`, the speed/accuracy front of
    stable measurements and, with a cost axis, the cost/speed/accuracy front."""
    if baseline is None or baseline == EACH_MODEL:
        view = comparison.speedups_each_job(view)[0]
    else:
        view = frames.add_speedups(view, baseline)
    view = frames.add_accuracy_loss(view, loss)
    view = frames.add_pareto(view)  # an unstable result beyond it is named, never on it
    return frames.add_cost_pareto(view, cost_key) if cost_key is not None else view


def figures(
    view: pd.DataFrame, chosen: list[str], samples: dict, loss_label: str, cost_key: str | None
) -> list[tuple[str, Any]]:
    """The chosen charts in CHARTS' order; no cost chart when nothing is priced."""
    if cost_key is None:
        chosen = [key for key in chosen if key != "cost"]
    builders = {
        "latency": lambda: charts.latency_vs_batch(view),
        "throughput": lambda: charts.throughput_vs_batch(view),
        "distribution": lambda: charts.latency_distribution(view, samples),
        "pareto": lambda: charts.accuracy_vs_speedup(view, loss_label),
        "memory": lambda: charts.memory_chart(view),
        "cost": lambda: charts.cost_vs_accuracy(view, cost_key or "", loss_label),
    }
    return [(key, builders[key]()) for key in CHARTS if key in chosen]


def report_html(
    view: pd.DataFrame,
    job_ids: list[int],
    baseline: str | None,
    loss_label: str,
    cost_key: str | None,
    samples: dict,
) -> str:
    """One self-contained file: every chart of the prepared view and its table."""
    every = figures(view, list(CHARTS), samples, loss_label, cost_key)
    title = "Optiboard comparison: " + ", ".join(f"job {j}" for j in sorted(job_ids))
    named = baseline_text(view, baseline)
    said = report_sentences(view, baseline, cost_key)
    return exports.html_report(title, view, [figure for _, figure in every], named, said)


EACH_JOB_CAPTION = (
    "Each job's rows are divided by that job's own first FP32 series (a job that measured no "
    "FP32: its model's first)."
)


def report_sentences(view: pd.DataFrame, baseline: str | None, cost_key: str | None) -> list[str]:
    """The page's sentences beside its charts and table: how the baselines divide, the cheapest
    configuration (per model), what each front spans and the points it leaves out with their
    reasons (chart_captions)."""
    said = (
        [EACH_JOB_CAPTION] if baseline in (None, EACH_MODEL) and baseline_text(view, None) else []
    )
    said += cost.cheapest_sentences(view)
    said += chart_captions(view, cost_key).values()
    return [s for s in said if s]


def chart_captions(view: pd.DataFrame, cost_key: str | None) -> dict[str, str]:
    """The sentences under the accuracy/speedup ("pareto") and cost charts, by CHARTS key: what
    each front spans where the view holds several (each model's, each baseline's), then the
    points it leaves out with their reasons; a chart with nothing to say is left out."""
    fronts: dict[str, tuple[Sequence[str], str]] = {
        "pareto": (front.SPEEDUP_FRONT, "beyond_pareto")
    }
    if cost_key is not None:
        fronts["cost"] = ((cost_key, *front.COST_FRONT), "beyond_cost_pareto")
    return front.captions(view, fronts)


def default_html(job_ids: list[int], prices: pricing.Prices = ()) -> tuple[str, int]:
    """The report the page offers for these jobs before any choice is changed: every measured
    configuration, each job's own first FP32 series as its baseline, mean relative error, the
    first cost axis with values; `prices` as the page's price override. Also how many
    configurations it holds."""
    frame = comparison.priced_frame(job_ids, prices)
    view = frame[frame["status"] == ResultStatus.OK.value]
    axes = priced_axes(view)
    cost_key = axes[0].key if axes else None
    baseline = EACH_MODEL
    view = prepared(view, baseline, DEFAULT_LOSS, cost_key)
    samples = frames.samples_for([int(i) for i in view["result_id"]])
    loss_label = frames.LOSS_METRICS[DEFAULT_LOSS]
    return report_html(view, job_ids, baseline, loss_label, cost_key, samples), len(view)
