"""Seeding for page tests: models through the real ingest, results from a real worker run.

add_model hands a small onnx.helper model (tests/models.py) to backend ingest, as an upload
would; finished_sweep queues a sweep and runs the real worker loop (backend/queue/worker.py
serve(once=True)) in this process, so every result row, event and artifact is what the worker
writes. Only the measurement is shortened (FAST), so a configuration takes about a second.

Each step (add_model, add_job, queued_study, run_queued) goes through tests/pages/stored.py: the
first test of a run to take it from a given state runs it for real, and later tests that take the
same step from the same state get a copy of the data directory it left (a worker run costs tens
of seconds, a copy milliseconds).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from streamlit.testing.v1 import AppTest

from backend.models.ingest import ingest_file
from backend.queue import capabilities, jobs
from backend.queue.worker import serve
from backend.records import JobRow, ModelRow
from backend.results import StoredResult
from backend.specs import MeasureSettings, Precision, SweepSpec
from storage.repo import models as model_store
from storage.repo import results as result_store
from tests.pages import stored
from tests.spawning import plain_main

ROOT = Path(__file__).resolve().parents[2]

# Enough samples for percentiles and one accuracy comparison, in about a second per configuration.
FAST = MeasureSettings(
    warmup_runs=2, window_runs=10, window_min_seconds=0.05, max_seconds=2, accuracy_samples=1
)


def add_model(path: Path, name: str | None = None) -> ModelRow:
    """Ingest an upload (an ONNX file, a zip) exactly as the Models page's upload does."""
    return stored.step(
        "add_model",
        (stored.file_digest(path), path.name, name),
        lambda: ingest_file(path, path.name, name=name),
        lambda row: row.id,
        model_store.get_model,
    )


def add_job(model_id: int, spec: SweepSpec, label: str | None = None) -> JobRow:
    """Queue a sweep (with the FAST measurement) without running it."""
    spec = dataclasses.replace(spec, measure=FAST)
    return stored.step(
        "add_job",
        (model_id, spec, label),
        lambda: jobs.submit_sweep(model_id, spec, label=label),
        lambda job: job.id,
        jobs.get_job,
    )


def run_queued() -> int:
    """Run every queued job to the end with the real worker loop, in this process (its spawned
    children must not re-run the AppTest's app.py: see tests/spawning.py)."""

    def run() -> int:
        with plain_main():
            return serve(once=True, poll_seconds=0.05)

    return stored.step("run_queued", (), run, lambda count: count, int)


def run_sweep(model_id: int, spec: SweepSpec, label: str | None = None) -> JobRow:
    """Queue one sweep and let the worker finish it; returns the finished job."""
    job = add_job(model_id, spec, label=label)
    run_queued()
    return jobs.get_job(job.id)


def finished_sweep(
    model_id: int,
    precisions: tuple[Precision, ...] = (Precision.FP32, Precision.INT8_STATIC),
    batch_sizes: tuple[int, ...] = (1, 4),
    label: str | None = "seeded sweep",
) -> tuple[JobRow, list[StoredResult]]:
    """A sweep measured by the real worker on CPU, with its stored results."""
    spec = SweepSpec(precisions=precisions, batch_sizes=batch_sizes, calibration_samples=4)
    job = run_sweep(model_id, spec, label=label)
    return job, jobs.stored_results(job.id)


def steady(frame: pd.DataFrame) -> pd.DataFrame:
    """A results frame with every measurement judged stable and without stalls (its throughput
    at its median call), which a busy host cannot be made to give: tests then set the verdict
    or the figure they test."""
    frame["stable"] = True
    frame["throughput"] = frame["batch_size"] * 1000.0 / frame["p50_ms"]
    return frame


def stored_again(job: JobRow, unstable: Collection[str]) -> int:
    """The worker's rows of a finished sweep stored in a new job as the worker stores them, the
    configurations keyed in `unstable` judged unstable and the rest stable (which runs stall
    cannot be chosen on a real host), a stable one's throughput that of its median call (no
    stall: its speedup and throughput ratio tell one speed); returns the new job's id."""
    again = jobs.submit_sweep(job.model_id, SweepSpec.from_dict(job.spec), label="stored again")
    rows = result_store.list_results(job_ids=[job.id])
    samples = result_store.result_samples([r.id for r in rows])
    for row in rows:
        payload = {**row.payload, "stable": row.payload["config_key"] not in unstable}
        if payload["stable"] and payload.get("latency"):
            batch = payload["configuration"]["batch_size"]
            payload["throughput"] = batch * 1000.0 / payload["latency"]["p50"]
        assert result_store.save_result(again.id, payload, samples[row.id]) is not None
    return again.id


def queued_study(
    model_id: int, slo_p99_ms: float = 50.0, curve_sizes: tuple[int, ...] = (1, 4)
) -> JobRow:
    """A small serving study (one policy, two concurrency levels) queued, not yet run;
    curve_sizes () measures no costs (no predictions, and a faster run)."""
    from backend.serving.study import ServedVariant, ServingStudy, submit_study
    from backend.serving.types import BatchingPolicy, LoadSpec, Scenario

    study = ServingStudy(
        variants=(ServedVariant(),),
        policies=(BatchingPolicy(max_batch_size=8, max_queue_delay_us=2000),),
        loads=tuple(LoadSpec(Scenario.CONCURRENCY, duration_s=0.6, concurrency=c) for c in (1, 4)),
        slo_p99_ms=slo_p99_ms,
        curve_sizes=curve_sizes,
    )
    return stored.step(
        "queued_study",
        (model_id, study),
        lambda: submit_study(model_id, study, label="seeded study"),
        lambda job: job.id,
        jobs.get_job,
    )


def finished_study(model_id: int, slo_p99_ms: float = 50.0) -> JobRow:
    """queued_study measured by the real worker loop on a real Triton server."""
    job = queued_study(model_id, slo_p99_ms)
    run_queued()
    return jobs.get_job(job.id)


def unavailable_provider() -> str | None:
    """An execution provider this machine cannot run (its configurations end "unavailable")."""
    table = capabilities.local_providers().get("onnxruntime", [])
    return next((s["name"] for s in table if not s.get("available")), None)


ACCOUNT_PASSWORD = "correct horse battery"


def make_account(role: str) -> str:
    """A real account of that role, named after it (made on first use); returns its name."""
    from backend.auth import accounts
    from backend.auth.cli import cli_principal

    if accounts.principal_for(role) is None:
        accounts.add_account(cli_principal(), role, role, ACCOUNT_PASSWORD)
    return role


def sign_in_as(at: AppTest, role: str) -> AppTest:
    """A session signed in to a real account of that role, as the sign-in form leaves it."""
    from backend.auth import sessions
    from pages.access import SESSION_KEY

    # AppTest sends no cookies, so the browser key is None, as the sign-in form would keep it
    at.session_state[SESSION_KEY] = (sessions.begin(make_account(role)), None)
    return at


def submit_sign_in(at: AppTest, name: str, password: str) -> AppTest:
    """The sign-in form filled in and submitted, as a person does it; the page after it."""
    at.text_input(key="signin_name").input(name)
    at.text_input(key="signin_password").input(password)
    next(b for b in at.button if b.label == "Sign in").click()
    return at.run()


def open_page(page: str, role: str | None = "admin", **query: object) -> AppTest:
    """Run app.py (router, gate, sidebar and all) on one page, with the given URL query.

    The session is signed in with that role; role=None leaves it signed out.
    """
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    if role is not None:
        sign_in_as(at, role)
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.switch_page(f"pages/{page}.py")
    return at.run()


def metric_rows(node: Any) -> Iterator[list[str]]:
    """For each row of columns on a page, the labels of the metrics its columns hold: a page
    draws a few to a row where more would cut their names."""
    children = [node.children[i] for i in sorted(getattr(node, "children", {}))]
    columns = [c for c in children if c.type == "column"]
    nested = any(any(True for _ in c.get("column")) for c in columns)  # a layout, not a row
    if columns and not nested:
        labels = [m.label for c in columns for m in c.get("metric")]
        if labels:
            yield labels
    for child in children:
        yield from metric_rows(child)


def texts(at: AppTest) -> str:
    """Everything a user reads on the page, in one string, for `in` checks."""
    parts = [e.value for e in at.markdown] + [e.value for e in at.caption]
    parts += [e.value for e in at.title] + [e.value for e in at.subheader]
    for kind in ("info", "warning", "error", "success"):
        parts += [e.value for e in getattr(at, kind)]
    parts += [f"{m.label}={m.value}" for m in at.metric]
    return "\n".join(str(p) for p in parts)


def verdict_box(at: AppTest) -> Any:
    """The Serve page's predicted verdict: the one alert that starts like Model Analyzer's
    summary ("In 4 predicted configurations ..."), success, info or warning by its firmness."""
    alerts = [*at.main.success, *at.main.info, *at.main.warning]
    found = [a for a in alerts if str(a.value).startswith("In ")]
    assert len(found) == 1, [a.value for a in alerts]
    return found[0]


def recommendation(at: AppTest) -> str:
    """The verdict and the list of what it rests on, as the CLI's one paragraph joins them."""
    listed = [m.value for m in at.main.markdown if str(m.value).startswith("- ")]
    details = [line[2:] for block in listed[:1] for line in block.splitlines()]
    return " ".join([verdict_box(at).value, *details])
