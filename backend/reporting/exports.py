"""Results leaving Optiboard: CSV/JSON of the comparison table, full records, HTML report."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from backend.counts import counted
from backend.reporting.csvsafe import safe_frame
from backend.reporting.metrics import REGISTRY as METRICS
from backend.reporting.provenance import what_ran
from backend.results import StoredResult
from storage.repo import results as result_store


def export_csv(frame: pd.DataFrame) -> bytes:
    """Cells that a spreadsheet would run as formulas are defused (see csvsafe)."""
    return safe_frame(frame).to_csv(index=False).encode("utf-8")


def export_json(frame: pd.DataFrame) -> bytes:
    """Records with NaN as null, so the file loads anywhere."""
    records = json.loads(frame.to_json(orient="records", date_format="iso"))
    return json.dumps(records, indent=2).encode("utf-8")


REPORT_COLUMNS = [
    "label",
    "status",
    "stable",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "throughput",
    "cost_per_million",
    "speedup",
    "speedup_firm",
    "accuracy_loss",
    "peak_rss_mb",
    "peak_rss_scope",
    "j_per_sample",
    "idle_w",
    "energy_source",
    "notes",
]


ONCE_COLUMNS = ("peak_rss_scope", "energy_source", "notes")  # said once when every row says it
SHOWN_AS = {"stable": "Stable", "speedup_firm": "Speedup firm"}  # the page's headers


def _report_columns(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The report table's columns, and a sentence for each left out: empty in every row (the
    page leaves those out too), or one text every row repeats (said once above the table)."""
    columns, said, empty = [], [], []
    for c in (c for c in REPORT_COLUMNS if c in frame.columns):
        values = frame[c].dropna()
        if c != "label" and values.empty:
            empty.append(c)
        elif c in ONCE_COLUMNS and len(frame) > 1 and values.nunique() == 1:
            if len(values) == len(frame):
                said.append(f"{c} (every row): {values.iloc[0]}")
            else:
                columns.append(c)
        else:
            columns.append(c)
    if empty:
        said.append("Not shown, empty in every row: " + ", ".join(empty))
    return columns, said


def _glossary(columns: list[str]) -> str:
    """What each figure of the report's table is: label, unit and which way is better."""
    items = "".join(
        f"<li><code>{m.key}</code>: {html.escape(m.axis_title)}, {m.better.value} is better</li>"
        for m in (METRICS[c] for c in columns if c in METRICS)
    )
    return f"<ul style='font-size:13px'>{items}</ul>" if items else ""


def what_ran_in(frame: pd.DataFrame) -> list[str]:
    """The distinct runtime, hardware and host lines behind a results frame's rows."""
    if frame.empty or "software" not in frame.columns:
        return []
    return what_ran(zip(frame["software"], frame["hardware"], frame["ran_on"], strict=True))


def _table(frame: pd.DataFrame) -> pd.DataFrame:
    """Each figure as the registry formats it (148807.0, not .4g's 1.488e+05), every empty cell
    "–" (na_rep misses a column of None only)."""
    shown = frame.astype(object).where(frame.notna(), "–")
    for key in (c for c in SHOWN_AS if c in frame.columns):  # yes / no, as the CLI prints them
        shown[key] = [{True: "yes", False: "no"}.get(v, "–") for v in frame[key]]
    for key in (c for c in frame.columns if c in METRICS):
        shown[key] = [METRICS[key].text(v) if pd.notna(v) else "–" for v in frame[key]]
    return shown


def html_report(
    title: str,
    frame: pd.DataFrame,
    figures: list[Any],
    baseline: str | None,
    sentences: Sequence[str] = (),
) -> str:
    """One self-contained HTML file: plotly.js inlined once, the page's sentences (cheapest,
    beyond the fronts, how the baselines divide), every figure and the summary table."""
    parts = []
    for index, figure in enumerate(figures):
        parts.append(
            figure.to_html(full_html=False, include_plotlyjs=index == 0, default_height="480px")
        )
    columns, once = _report_columns(frame)
    shown = _table(frame[columns]).rename(columns=SHOWN_AS)
    table = shown.to_html(index=False, float_format=lambda v: f"{v:.4g}")
    said = "".join(f"<p>{html.escape(s)}</p>" for s in sentences)
    once_html = "".join(f"<p style='font-size:13px'>{html.escape(s)}.</p>" for s in once)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    base = html.escape(baseline) if baseline else "none"
    ran = [html.escape(line) for line in what_ran_in(frame)]
    ran_html = f"<p>What ran: {'; '.join(ran)}.</p>" if ran else ""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2rem;}table{border-collapse:collapse;"
        "font-size:13px}td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}"
        "td:first-child{text-align:left}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>Generated {generated} by Optiboard; "
        f"{counted(len(frame), 'configuration')}; baseline: {base}.</p>{ran_html}{said}"
        + "".join(parts)
        + f"<h2>All configurations</h2>{once_html}{table}{_glossary(columns)}</body></html>"
    )


def results_records_json(stored: list[StoredResult]) -> bytes:
    """Every result's full typed record (environment, notes, raw samples) as JSON."""
    raw = result_store.result_samples([r.id for r in stored])
    records = [
        {
            "result_id": r.id,
            "job_id": r.job_id,
            **r.result.to_dict(),
            "samples_ms": np.asarray(raw.get(r.id, []), dtype=float).tolist(),
        }
        for r in stored
    ]
    return json.dumps(records, indent=2, default=str).encode()
