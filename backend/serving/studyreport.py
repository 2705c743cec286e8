"""A stored serving study in the terminal: `optiboard show` prints what the Serve page's measured
view shows (its points, the sentence saying which configuration meets the p99 bound, the cheapest
one, what the predictions come from, what ran), and `optiboard export` writes it: CSV is the
page's table of measured points (view.measured_table), JSON every point and cost measurement as
the worker stored it, each load point with its requests' samples (backend/serving/samples.py) as
a sweep's JSON carries its results' samples. Everything is read through view.study_view, as the
page reads it.
"""

from __future__ import annotations

import json

import pandas as pd

from backend import pricing
from backend.counts import counted
from backend.errors import UserError
from backend.reporting import exports
from backend.reporting.metrics import cell
from backend.reporting.text import table
from backend.serving.distribution import BEFORE, stored_samples
from backend.serving.samples import RequestSamples
from backend.serving.study import load_label
from backend.serving.types import LoadPoint, Scenario
from backend.serving.view import StudyView, energy_sources, measured_table, study_view
from storage.repo import serving as point_store

# The page's table columns the terminal shows (the rest are in the CSV), as the terminal heads them
SHOWN = {
    "configuration": "configuration",
    "load": "offered",
    "req/s": "achieved req/s",
    "p50 (ms)": "p50 ms",
    "p99 (ms)": "p99 ms",
    "queue (ms)": "queue ms",
    "compute (ms)": "compute ms",
    "mean batch": "mean batch",
    "predicted p99 (ms)": "predicted p99 ms",
}
HEADERS = [*SHOWN.values(), "stable", "client"]


def _points(view: StudyView) -> list[tuple[str, LoadPoint]]:
    """Every measured point with its configuration, in the page table's row order."""
    return [(c.label, p) for c in view.configurations for p in c.measured]


def _rows(view: StudyView) -> list[list[str]]:
    """The page's table, its shown columns, with whether each point is stable and whether the
    load generator kept up with its Server schedule (a saturated client says nothing about the
    server; a closed loop's N in flight has no schedule to fall behind, so it says so)."""
    frame = measured_table(view)
    rows = []
    for (_, row), (_, point) in zip(frame.iterrows(), _points(view), strict=True):
        client = (  # only a Server schedule can be fallen behind; a closed loop is not checked
            "saturated"
            if point.generator_saturated
            else "kept up"
            if point.scenario is Scenario.SERVER
            else "closed loop"
        )
        rows.append([*(cell(row[c], "") for c in SHOWN), "yes" if point.stable else "no", client])
    return rows


def _notes(view: StudyView) -> list[str]:
    """Per point, why it is unstable or the client saturated, and what the server did
    differently; nothing for a stable point without notes."""
    lines = []
    for label, point in _points(view):
        said = ([] if point.stable else [point.stability_note]) + list(point.notes)
        if point.generator_saturated:
            said.insert(0, "the load generator could not keep up: not the server's latency")
        lines += [f"  {label} | {load_label(point.spec)}: {note}" for note in said]
    return lines


def show_lines(
    job_id: int, prices: pricing.Prices = (), slo_p99_ms: float | None = None
) -> list[str]:
    """The study's measured points as a table and the page's sentences under it."""
    view = study_view(job_id, slo_p99_ms, prices)
    lines = [f"{view.measurements} of {counted(view.planned, 'load point')} measured"]
    if not view.measurements:
        return [*lines, view.sentence]
    lines += [table(_rows(view), HEADERS), view.sentence]
    lines += [view.cost.sentence] if view.cost is not None else []
    lines += [f"predictions: {line}" for line in view.prediction_captions]
    lines += [f"J/request, idle W: {source}" for source in energy_sources(view)]
    notes = _notes(view)
    return lines + (["notes:", *notes] if notes else [])


def export_studies(job_ids: list[int], fmt: str, prices: pricing.Prices = ()) -> tuple[bytes, int]:
    """(the file's bytes, how many points): CSV the page's table of each study (a job column
        first), JSON every stored point and cost measurement with its job and kind, a load point
    with its samples (or the sentence saying it was stored before they were kept)."""
    if fmt == "csv":
        frames = [measured_table(study_view(j, None, prices)).assign(job=j) for j in job_ids]
        frame = pd.concat([f for f in frames if not f.empty] or [pd.DataFrame()])
        if frame.empty:
            raise UserError(f"Jobs {', '.join(map(str, job_ids))} have no load points yet.")
        frame = frame[["job", *(c for c in frame.columns if c != "job")]]
        return exports.export_csv(frame), len(frame)
    stored = point_store.list_points(job_ids)
    if not stored:
        raise UserError(f"Jobs {', '.join(map(str, job_ids))} have no load points yet.")
    samples = stored_samples([p.id for p in stored if p.kind == point_store.POINT])
    records = [
        {
            "job_id": p.job_id,
            "point_id": p.id,
            "kind": p.kind,
            "key": p.point_key,
            **p.payload,
            **(_samples_record(samples.get(p.id)) if p.kind == point_store.POINT else {}),
        }
        for p in stored
    ]
    return json.dumps(records, indent=2, default=str).encode(), len(records)


def _samples_record(samples: RequestSamples | None) -> dict[str, object]:
    """A load point's requests as its record carries them, or the sentence why it has none."""
    if samples is None:
        return {"samples": None, "samples_note": f"This point was {BEFORE}, so it has none."}
    return {"samples": samples.to_dict()}
