"""Jobs page: the table, one job's configurations and log, cancel and retry."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.energy import meter_for
from backend.queue import jobs
from backend.records import JobState
from backend.specs import Precision, SweepSpec
from pages.components.formatting import plain
from pages.components.live import LIVE_REFRESH_SECONDS
from storage.repo.jobs import claim_job, finish_job, log_event
from tests.pages.fragments import Timed, rerun_fragment, timed_fragments
from tests.pages.seed import (
    ROOT,
    add_job,
    add_model,
    finished_sweep,
    open_page,
    run_sweep,
    sign_in_as,
    texts,
    unavailable_provider,
)


def test_empty_jobs_page_points_to_optimize(data_dir: Path) -> None:
    at = open_page("jobs")
    assert not at.exception
    assert "No jobs yet" in texts(at)


def test_table_lists_jobs_with_state_and_progress(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    done, _ = finished_sweep(model.id, batch_sizes=(1,), label="done one")
    queued = add_job(model.id, SweepSpec(batch_sizes=(1, 2, 4)), label="waiting")
    at = open_page("jobs")
    table = at.dataframe[0].value
    assert list(table["job"]) == [queued.id, done.id]
    assert list(table["configurations"]) == ["0/3", "2/2"]
    assert "refreshing every few seconds" in texts(at)


def test_job_detail_shows_configurations_results_and_failures(
    data_dir: Path, mlp_path: Path
) -> None:
    missing = unavailable_provider()
    if missing is None:
        pytest.skip("every ONNX Runtime provider is available on this machine")
    model = add_model(mlp_path)
    job = run_sweep(model.id, SweepSpec(providers=("cpu", missing)))
    at = open_page("jobs", job=job.id)
    assert not at.exception
    configs = next(d.value for d in at.dataframe if "configuration" in d.value.columns)
    assert list(configs["status"]) == ["ok", "unavailable"]
    stored = {r.result.config_key: r.result for r in jobs.stored_results(job.id)}
    assert configs["why / error"].iloc[1] == stored[configs["key"].iloc[1]].error
    # the job succeeded, and its bar says which configuration did not measure
    [bar] = [p.proto.text for p in at.get("progress")]
    assert bar == "✅ succeeded · 2 of 2 configurations · 1 unavailable"
    assert f"Job {job.id}" in texts(at)
    cpu = meter_for("cpu")  # the CPU row's energy, or why this host cannot measure it
    assert configs["J/sample"].notna().iloc[0] == cpu.measurable
    assert f"J/sample, idle W: {plain(cpu.source)}" in texts(at)


def test_cancel_a_queued_job(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    job = add_job(model.id, SweepSpec())
    at = open_page("jobs", job=job.id)
    assert _action_row(at, f"cancel_{job.id}")[0] == f"cancel_{job.id}"
    at.button(key=f"cancel_{job.id}").click().run()
    assert jobs.get_job(job.id).state == JobState.CANCELLED
    # the job ended: Retry comes last, after the links, so a second click on Cancel misses it
    row = _action_row(at, f"retry_{job.id}")
    assert row[-1] == f"retry_{job.id}" and len(row) > 1, row
    assert at.button(key=f"retry_{job.id}").label == "Retry"  # cancelled: a retry


def _action_row(at: AppTest, key: str) -> list[str | None]:
    """The detail's row of actions holding the button with this key, in the order drawn: each
    button's key (None for a page link)."""
    for block in at.get("flex_container"):
        keys = [getattr(child, "key", None) for child in block.children.values()]
        if key in keys:
            return keys
    raise AssertionError(f"no action row holds {key}")


def test_retry_a_finished_job_queues_a_copy_and_shows_it(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1,))
    at = open_page("jobs", job=job.id)
    assert at.button(key=f"retry_{job.id}").label == "Run again"  # it succeeded: not a retry
    at.button(key=f"retry_{job.id}").click().run()
    newest = jobs.list_jobs()[0]
    assert newest.id != job.id and newest.state == JobState.QUEUED
    assert newest.spec == job.spec
    assert at.query_params["job"] == str(newest.id)


def test_run_again_with_changes_links_to_optimize_with_the_sweep(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1, 4))
    at = open_page("jobs", job=job.id)
    links = [e for e in at.get("page_link") if "Run again" in e.proto.label]
    assert links
    query = links[0].proto.query_string
    assert links[0].proto.page == "optimize"
    assert "batches=1%2C4" in query and f"from_job={job.id}" in query
    from urllib.parse import parse_qsl

    reopened = jobs.spec_from_query(dict(parse_qsl(query)))
    assert reopened == jobs.spec_of(job)  # every field of the stored sweep is in the link


def test_states_filter_comes_from_the_url(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1,))
    add_job(model.id, SweepSpec(precisions=(Precision.FP32,)))
    at = open_page("jobs", states="queued")
    assert list(at.dataframe[0].value["configurations"]) == ["0/1"]


def test_an_editor_pins_a_sweep_as_a_baseline_audited_and_a_viewer_cannot(
    data_dir: Path, mlp_path: Path
) -> None:
    from backend import baselines
    from backend.auth.audit import recent

    model = add_model(mlp_path)
    job, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1,))
    viewer = open_page("jobs", role="viewer", job=job.id)
    assert viewer.button(key=f"pin_{job.id}").disabled
    said = "Your role (viewer) cannot pin or re-run a baseline; editors and admins can."
    assert said in [c.value for c in viewer.caption]  # a greyed-out button alone says nothing
    # no Retry for a viewer, and the reason in its place
    assert f"retry_{job.id}" not in [b.key for b in viewer.button]
    retry = "Your role (viewer) cannot retry a job; editors and admins can."
    assert retry in [c.value for c in viewer.caption]
    at = open_page("jobs", role="editor", job=job.id)
    at.button(key=f"pin_{job.id}").click().run()
    assert not at.exception, at.exception
    assert baselines.is_pinned(job.id)
    entry = recent(limit=1)[0]
    assert (entry.actor, entry.action, entry.target, entry.outcome) == (
        "editor",
        "baseline_pin",
        f"job {job.id}",
        "ok",
    )
    assert at.button(key=f"pin_{job.id}").label == "Unpin baseline"
    at.button(key=f"rerun_{job.id}").click().run()  # queued on the baseline's own environment
    [rerun] = baselines.reruns(job.id)
    assert rerun.spec["baseline_of"] == job.id and rerun.spec["runtime_env"] == "default"


def _detail_fragment(at: AppTest, job_id: int) -> Timed | None:
    """The timed fragment that draws the job's detail (its title), if the detail is in one."""
    found = [f for f in timed_fragments(at) if f"Job {job_id}" in f.text]
    return found[0] if found else None


def test_a_running_jobs_detail_follows_the_worker_and_stops_polling_once_it_ended(
    data_dir: Path, mlp_path: Path
) -> None:
    """The walkthrough's detail stayed at "queued · 0 of 2", attempts 0, no worker, while the
    table above said running: only the table was redrawn by the timed reruns."""
    model = add_model(mlp_path)
    job = add_job(model.id, SweepSpec(precisions=(Precision.FP32,), batch_sizes=(1, 2)))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    sign_in_as(at, "admin")
    at.query_params["job"] = str(job.id)
    at.switch_page("pages/jobs.py")
    detail = _detail_fragment(at, job.id)
    assert detail is not None and detail.interval == LIVE_REFRESH_SECONDS
    assert "queued · 0 of 2 configurations" in detail.text

    claimed = claim_job("worker7", 60.0, job.id)  # what a worker does first
    assert claimed is not None and claimed.id == job.id
    log_event(job.id, "claimed by worker7")
    rerun_fragment(at, detail.fragment_id)  # the browser's next timed rerun of the detail
    assert not at.exception, at.exception
    shown = texts(at)
    assert "running · 0 of 2 configurations" in [p.proto.text for p in at.get("progress")][0]
    assert "Attempts=1/3" in shown and "Worker: worker7" in shown
    assert "claimed by worker7" in at.code[0].value  # the log follows too
    # in an expander of its own identity, which a redraw or the job ending does not reset
    assert [e.key for e in at.expander if e.label == "Log"] == [f"log_{job.id}"]
    configs = next(d.value for d in at.dataframe if "configuration" in d.value.columns)
    assert list(configs["status"]) == ["pending", "pending"]
    assert at.button(key=f"cancel_{job.id}").label == "Cancel"  # the same widget, same key

    # the job ends: the next timed rerun redraws the whole page, which polls it no more
    assert finish_job(job.id, JobState.FAILED, error="lost the GPU", worker_id="worker7")
    rerun_fragment(at, detail.fragment_id)
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Jobs"] and "State=failed" in texts(at)
    assert _detail_fragment(at, job.id) is None
