"""The Pareto fronts the Compare charts star, computed from stable, ok measurements only.

An unstable measurement's figures moved while they were measured, so, as in cost.cheapest, it
never carries a claim: it is still drawn (hollow, charts.markers_by_series) but never joined to
the front. Where one measured beyond the front, the chart's caption and its hover say so with
its numbers and ask for a re-run, the way cost.py names a cheaper unstable result.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from backend import pricing
from backend.reporting import metrics
from backend.results import GAP, ResultStatus, speeds_disagree

# The figures of each front, each read its registered way: the accuracy/speedup chart's and the
# cost/speed/accuracy chart's (its first figure, the cost axis, is picked on the page).
SPEEDUP_FRONT = ("speedup", "accuracy_loss")
COST_FRONT = ("throughput", "accuracy_loss")


def _ok(frame: pd.DataFrame) -> np.ndarray:
    if "status" not in frame:
        return np.ones(len(frame), dtype=bool)
    return (frame["status"] == ResultStatus.OK.value).to_numpy()


def unstable(frame: pd.DataFrame) -> np.ndarray:
    """Measurements whose windows did not agree (stable False); unknown (None) is not unstable,
    as marks._stability_marks draws it filled."""
    if "stable" not in frame:
        return np.zeros(len(frame), dtype=bool)
    return frame["stable"].eq(False).to_numpy()


def _shaky(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """Rows whose figures on this front are not firm: an unstable measurement, or, where the
    front reads speedup, a speedup that is not firm (frames.add_speedups)."""
    shaky = unstable(frame)
    if "speedup" in keys and "speedup_firm" in frame:
        shaky = shaky | ~frame["speedup_firm"].fillna(True).astype(bool).to_numpy()
    return shaky


def _values(frame: pd.DataFrame, keys: Sequence[str], rows: np.ndarray) -> np.ndarray:
    """The figures of `rows` (others NaN), one column per key, as measured."""
    columns = [
        np.where(rows, pd.to_numeric(frame[key], errors="coerce").to_numpy(dtype=float), np.nan)
        for key in keys
    ]
    return np.column_stack(columns) if columns else np.empty((len(frame), 0))


def front_mask(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """True on the Pareto front of the ok, not unstable rows over the figures `keys`."""
    values = _values(frame, keys, _ok(frame) & ~_shaky(frame, keys))
    return metrics.pareto_many([(metrics.metric(k), values[:, i]) for i, k in enumerate(keys)])


def beyond_mask(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """True on an ok but unstable row that no steady row matches or beats in every figure: it
    would have been on the front, had its measurement been stable."""
    steady = _ok(frame) & ~_shaky(frame, keys)
    shaky = _ok(frame) & _shaky(frame, keys)
    signs = np.array([1.0 if metrics.metric(k).higher_is_better else -1.0 for k in keys])
    values = _values(frame, keys, steady | shaky) * signs  # now every figure is better higher
    finite = np.isfinite(values).all(axis=1)
    kept = values[steady & finite]
    mask = np.zeros(len(frame), dtype=bool)
    for index in np.flatnonzero(shaky & finite):
        mask[index] = not (kept >= values[index]).all(axis=1).any()
    return mask


def _scope_columns(frame: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """What divides a view into fronts: the model, and where the front reads speedup, the
    baseline that speedup divides by (add_speedups' speedup_baseline)."""
    by = ["model_id", *(["speedup_baseline"] if "speedup" in keys else [])]
    return [column for column in by if column in frame]


def _scopes(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """Each row's front, numbered; -1 for a row with a figure missing (it is on none)."""
    values = _values(frame, keys, np.ones(len(frame), dtype=bool))
    drawn = np.isfinite(values).all(axis=1)
    by = _scope_columns(frame, keys)
    if not by or frame.empty:
        return np.where(drawn, 0, -1)
    number = frame.groupby(by, sort=False, dropna=False).ngroup().to_numpy()
    return np.where(drawn, number, -1)


def each_front(frame: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """front_mask and beyond_mask within each model's rows (and, for speedups, each baseline's):
    speedups over an MLP's FP32 and over a CNN's are ratios of different denominators, and an
    MLP's configuration is no alternative to a CNN's, so one model's point never pushes
    another's off its front (two models' FP32 rows, both 1.00x, starred one of them)."""
    on, beyond = np.zeros(len(frame), dtype=bool), np.zeros(len(frame), dtype=bool)
    scopes = _scopes(frame, keys)
    for scope in np.unique(scopes[scopes >= 0]):
        rows = np.flatnonzero(scopes == scope)
        on[rows] = front_mask(frame.iloc[rows], keys)
        beyond[rows] = beyond_mask(frame.iloc[rows], keys)
    return on, beyond


def scope_names(frame: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """Each row's front as the legend names it: "" where the rows make one front, else its
    model ("(mlp)"), or, where one model's rows divide by several baselines, the baseline
    ("(vs #1 mlp CPU FP32)", which names the model too)."""
    scopes = pd.Series(_scopes(frame, keys), index=frame.index)
    drawn = scopes >= 0
    if scopes[drawn].nunique() < 2:
        return pd.Series("", index=frame.index)
    if "speedup_baseline" in _scope_columns(frame, keys) and _by_baseline(frame, drawn):
        return "(vs " + frame["speedup_baseline"].astype(str) + ")"
    return "(" + frame["model"].astype(str) + ")"


def _by_baseline(frame: pd.DataFrame, drawn: pd.Series) -> bool:
    """Whether some model's drawn rows divide by more than one baseline."""
    if not {"model_id", "speedup_baseline"} <= set(frame.columns):
        return False
    rows = frame[drawn]
    return bool((rows.groupby("model_id")["speedup_baseline"].nunique() > 1).any())


SPANS = {
    "model": "Starred: each model's own Pareto front, not one across models: {why}.",
    "baseline": "Starred: each baseline's own Pareto front (each job divides by its own): {why}.",
}
SPAN_WHY = {
    "speedup": "a speedup is a ratio over its own baseline, and ratios over different "
    "baselines are not one scale",
    "cost": "one model's configuration is no alternative to another's, as the cheapest "
    "configuration is named per model",
    "perplexity": "one model's variant is no alternative to another's, and each model's "
    "perplexity is of its own weights",
}


def span_sentence(frame: pd.DataFrame, keys: Sequence[str]) -> str | None:
    """What the starred fronts span where the view holds several (None: one front)."""
    names = scope_names(frame, keys)
    if not names.ne("").any():
        return None
    drawn = pd.Series(_scopes(frame, keys) >= 0, index=frame.index)
    by_baseline = "speedup" in keys and _by_baseline(frame, drawn)
    why = SPAN_WHY[next((key for key in ("speedup", "perplexity") if key in keys), "cost")]
    return SPANS["baseline" if by_baseline else "model"].format(why=why)


def captions(view: pd.DataFrame, fronts: dict[str, tuple[Sequence[str], str]]) -> dict[str, str]:
    """The sentences under each chart of `fronts` (chart key -> the front's figures and the
    column marking rows beyond it): what its fronts span where the view holds several, then the
    rows it leaves out with their reasons; a chart with nothing to say is left out. The sweep
    view's charts (htmlreport.chart_captions) and the generation view's (points.py) alike."""
    said = {}
    for chart, (keys, beyond) in fronts.items():
        sentences = [span_sentence(view, keys), beyond_sentence(view, keys, beyond)]
        if found := [s for s in sentences if s]:
            said[chart] = " ".join(found)
    return said


def add_pareto(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns `pareto` (the accuracy/speedup front of stable, ok rows, each model's and each
    baseline's own: each_front) and `beyond_pareto` (unstable rows that measured beyond it)."""
    on, beyond = each_front(frame, SPEEDUP_FRONT)
    return frame.assign(pareto=on, beyond_pareto=beyond)


def figures_text(row: pd.Series, keys: Sequence[str]) -> str:
    """'speedup vs baseline 2.90x, accuracy loss 1.00e-02': one row's figures with units."""
    return ", ".join(_figure(metrics.metric(key), float(row[key])) for key in keys)


def _figure(metric: metrics.Metric, value: float) -> str:
    """One figure as the page's sentences write it: money as the cheapest sentence does
    ($0.0000666, not 0.00006663 $/M beside it), a rate of 100 or more grouped (1,667,673, not
    1667673.4)."""
    if metric.aggregation is metrics.Aggregation.PRICE and np.isfinite(value):
        return f"{metric.label} {pricing.dollars(value)}"
    if metric.aggregation is metrics.Aggregation.RATE and np.isfinite(value) and value >= 100:
        return f"{metric.label} {value:,.0f}{metric.suffix}"
    return f"{metric.label} {metric.text(value)}{metric.suffix}"


def beyond_sentence(frame: pd.DataFrame, keys: Sequence[str], column: str) -> str | None:
    """The rows `column` marks beyond the front, each with its figures and its own reason for
    being left off (rows sharing a reason said together), or None when there is none."""
    if column not in frame or not frame[column].fillna(False).astype(bool).any():
        return None
    beyond = frame[frame[column].fillna(False).astype(bool)]
    groups: dict[str, list[tuple[str, str]]] = {}
    for position in range(len(beyond)):
        reason, figures = _why_shaky(beyond, keys, position)
        groups.setdefault(reason, []).append((str(beyond.iloc[position]["label"]), figures))
    sentences = []
    for reason, rows in groups.items():
        if len(rows) == 1:
            said = f"{rows[0][0]} measured beyond the Pareto front ({rows[0][1]})"
        else:
            named = [f"{label} ({figures})" for label, figures in rows]
            said = ", ".join(named[:-1]) + f" and {named[-1]} measured beyond the Pareto front"
        why = REASONS[reason][0 if len(rows) == 1 else 1]
        them = "it" if len(rows) == 1 else "them"
        sentences.append(f"{said}, but {why}: re-run {them} on a quiet host.")
    return " ".join(sentences)


# Why a row beyond the front is left off it, said of one row and of several.
REASONS = {
    "unstable": (
        "its measurement was unstable, so it is drawn hollow and left off the front",
        "their measurements were unstable, so they are drawn hollow and left off the front",
    ),
    "disagree": (
        "its median-call speedup and its throughput ratio disagree by more than "
        f"{GAP:g}x, so its speedup is no firm figure; it is drawn as a hollow diamond and left "
        "off the front",
        "each one's median-call speedup and throughput ratio disagree by more than "
        f"{GAP:g}x, so their speedups are no firm figures; they are drawn as hollow diamonds and "
        "left off the front",
    ),
    "baseline": (
        "its speedup divides by an unstable baseline measurement, so it is drawn as a hollow "
        "diamond and left off the front",
        "their speedups divide by an unstable baseline measurement, so they are drawn as hollow "
        "diamonds and left off the front",
    ),
}


def _why_shaky(beyond: pd.DataFrame, keys: Sequence[str], position: int) -> tuple[str, str]:
    """Why one row beyond the front is left off it (a REASONS key): its own measurement moved,
    its median call and its throughput give two speeds (add_speedups), or its baseline's
    measurement moved; and its figures, with the throughput ratio where that is the reason."""
    row = beyond.iloc[position]
    figures = figures_text(row, keys)
    if bool(unstable(beyond)[position]) or "speedup" not in keys:
        return "unstable", figures
    ratio = float(row.get("throughput_ratio", np.nan))
    if bool(speeds_disagree(float(row["speedup"]), ratio)):
        return "disagree", f"{figures}, throughput ratio {ratio:.2f}x"
    return "baseline", figures


def add_speedups(frame: pd.DataFrame, baseline_series: str | None) -> pd.DataFrame:
    """Speedup of each row over the baseline family at the same model and batch size.

    Latency per call grows with the batch, so a row is only compared with the baseline's row of
    the same batch size; rows without such a partner get NaN rather than a misleading ratio, and
    so do rows that are not ok (wrong outputs were timed, but are no speedup and no Pareto point).
    `speedup_baseline`: the series divided by, where there is a speedup (each_front keeps
    ratios over different baselines on fronts of their own).
    `speedup_firm`: True only where there is a speedup, both the row and the baseline row it
    divides by measured stable, and the median call's speedup and the throughput ratio tell one
    speed (results.speeds_disagree, the rule the row's "Speed not explained" line cites): an
    unstable side, or stalls that make the two disagree, make the ratio no firm figure (front.py).
    """
    out = frame.copy()
    out["speedup"] = np.nan
    out["throughput_ratio"] = np.nan
    out["speedup_firm"] = True
    out["speedup_baseline"] = None  # the series a row's speedup divides by: its front's scope
    if baseline_series is None or out.empty:
        return out
    base = out[(out["series"] == baseline_series) & (out["status"] == ResultStatus.OK.value)]
    base = base.drop_duplicates(["model_id", "batch_size"]).set_index(["model_id", "batch_size"])
    if base.empty:
        return out
    keys = pd.MultiIndex.from_arrays([out["model_id"], out["batch_size"]])
    base_p50 = base["p50_ms"].reindex(keys).to_numpy(dtype=float)
    base_tp = base["throughput"].reindex(keys).to_numpy(dtype=float)
    ok = (out["status"] == ResultStatus.OK.value).to_numpy()  # wrong outputs have timings too
    with np.errstate(divide="ignore", invalid="ignore"):
        out["speedup"] = np.where(ok, base_p50 / out["p50_ms"].to_numpy(dtype=float), np.nan)
        tp = out["throughput"].to_numpy(dtype=float)
        out["throughput_ratio"] = np.where(ok, tp / base_tp, np.nan)
    speedup = out["speedup"].to_numpy(dtype=float)
    firm = np.isfinite(speedup)
    firm &= ~speeds_disagree(speedup, out["throughput_ratio"].to_numpy(dtype=float))
    if "stable" in base:
        firm &= ~base["stable"].eq(False).reindex(keys).fillna(False).to_numpy(dtype=bool)
    if "stable" in out:
        firm &= ~out["stable"].eq(False).to_numpy(dtype=bool)
    out["speedup_firm"] = firm
    out["speedup_baseline"] = np.where(np.isfinite(speedup), baseline_series, None)
    return out
