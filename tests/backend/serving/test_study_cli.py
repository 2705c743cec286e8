"""`optiboard show` and `export` of a serving study run by the real worker on a real Triton server
(walkthrough item 1: show printed only the runtime line and export found no results)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from backend.serving.server import TritonEnvironment
from backend.serving.types import LoadPoint
from backend.serving.view import StudyView, measured_table, study_view
from storage.repo import serving as point_store
from tests.backend.test_cli import optiboard, table_rows


def view_points(view: StudyView) -> list[LoadPoint]:
    """The measured points in the page table's row order."""
    return [p for c in view.configurations for p in c.measured]


def test_show_and_export_a_measured_study_as_the_serve_page_shows_it(
    triton_environment: TritonEnvironment, data_dir: Path, mlp_path: Path, tmp_path: Path
) -> None:
    assert optiboard("add", str(mlp_path)).returncode == 0
    queued = optiboard(
        "serve", "submit", "1", "--concurrency", "1,4", "--delay-us", "0,2000",
        "--duration", "0.6", "--slo", "20", "--price", "cpu=0.5",
    )  # fmt: skip
    assert queued.returncode == 0, queued.stderr
    worker = optiboard("worker", "--once", "--poll-seconds", "0.1")
    assert worker.returncode == 0 and "job 1 succeeded" in worker.stderr, worker.stderr

    shown = optiboard("show", "1")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("job 1: model 1, succeeded, 4/4 load points")
    view = study_view(1)  # what the Serve page reads
    page = measured_table(view)
    rows = table_rows(shown.stdout, "configuration")
    assert [(r["configuration"], r["offered"]) for r in rows] == list(
        zip(page["configuration"], page["load"], strict=True)
    )
    assert {r["offered"] for r in rows} == {"1 in flight", "4 in flight"}
    for row, (_, expected) in zip(rows, page.iterrows(), strict=True):
        assert float(row["achieved req/s"]) == expected["req/s"] > 0
        assert float(row["p99 ms"]) == expected["p99 (ms)"]
        assert float(row["queue ms"]) == expected["queue (ms)"]
        assert float(row["mean batch"]) == expected["mean batch"]
        # N in flight: no schedule to fall behind, so no "kept up" claimed
        assert row["stable"] in {"yes", "no"} and row["client"] in {"closed loop", "saturated"}
    assert view.sentence in shown.stdout  # "In 4 measurements across 2 configurations, ..."
    assert view.cost is not None and view.cost.sentence in shown.stdout  # at the stored $0.5/h
    assert "$0.5/h for cpu" in view.cost.sentence
    assert "predictions: original, measured on Triton: compute " in shown.stdout
    assert "runtime environment default: onnxruntime " in shown.stdout

    tight = optiboard("show", "1", "--slo", "0.001")  # the page's bound control
    assert "none meets the p99 bound of 0.001 ms" in tight.stdout

    csv = optiboard("export", "1")
    assert csv.returncode == 0, csv.stderr
    exported = pd.read_csv(io.StringIO(csv.stdout))
    assert list(exported.columns) == ["job", *page.columns]
    assert list(exported["req/s"]) == list(page["req/s"]) and set(exported["job"]) == {1}
    # the J/request column says what measured it, or why it is blank, as a sweep's CSV does
    sources = [p.energy.source for p in view_points(view)]
    assert all(sources) and list(exported["energy source"]) == sources
    out = tmp_path / "study.json"
    assert optiboard("export", "1", "--format", "json", "-o", str(out)).returncode == 0
    records = json.loads(out.read_text())
    stored = point_store.list_points([1])
    assert [(r["key"], r["kind"]) for r in records] == [(p.point_key, p.kind) for p in stored]
    points = [r for r in records if r["kind"] == point_store.POINT]
    assert len(points) == 4 and all(r["latency"]["p99"] > 0 for r in points)
