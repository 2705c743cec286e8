"""Home page: empty library, a populated one, and the worker list."""

from __future__ import annotations

import socket
from pathlib import Path

from sqlalchemy import delete, update

from backend.launch import isolation
from backend.queue import jobs
from backend.queue.worker import register
from pages.components.formatting import plain
from storage.db import session_scope
from storage.repo import workers as worker_store
from storage.schema import Job
from storage.states import JobState
from tests.backend.launch.sandboxed import in_sandbox
from tests.pages.seed import add_model, finished_sweep, open_page, texts


def test_empty_home_says_nothing_is_here_and_points_to_upload(data_dir: Path) -> None:
    at = open_page("home")
    assert not at.exception
    assert "Nothing here yet" in texts(at)
    assert "Jobs running=0" in texts(at)
    assert "No worker is alive" in texts(at)


def test_populated_home_counts_models_and_lists_latest_jobs(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path, "mlp")
    finished_sweep(model.id, batch_sizes=(1,), label="first sweep")
    at = open_page("home")
    assert not at.exception
    assert "Models=1" in texts(at)
    library = next(d.value for d in at.dataframe if "format" in d.value.columns)
    # "added": a generation job's INT4 variant is a library model nobody uploaded
    assert "added (UTC)" in library.columns and list(library["parameters"]) == ["874"]
    assert "Jobs finished=1" in texts(at)
    latest = next(d.value for d in at.dataframe if "label" in d.value.columns)
    assert "first sweep" in set(latest["label"])


def test_home_links_the_newest_succeeded_job_not_a_newer_cancelled_one(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path, "mlp")
    first, _ = finished_sweep(model.id, batch_sizes=(1,))
    at = open_page("home")
    [link] = [e.proto for e in at.get("page_link") if "Compare the results" in e.proto.label]
    assert link.label == f"Compare the results of job {first.id}"
    cancelled, _ = finished_sweep(model.id, batch_sizes=(1,), label="stopped")
    with session_scope() as session:  # as a cancel that landed after its first result
        session.execute(
            update(Job).where(Job.id == cancelled.id).values(state=JobState.CANCELLED.value)
        )
    at = open_page("home")
    [link] = [e.proto for e in at.get("page_link") if "Compare the results" in e.proto.label]
    assert link.label == f"Compare the results of job {first.id}"
    with session_scope() as session:  # only the cancelled job has results: it, named so
        session.execute(delete(Job).where(Job.id == first.id))
    at = open_page("home")
    [link] = [e.proto for e in at.get("page_link") if "Compare the results" in e.proto.label]
    assert link.label == f"Compare the results of job {cancelled.id} (cancelled)"


def test_alive_worker_is_listed_with_its_hardware(data_dir: Path) -> None:
    register("w-1")  # what a starting worker writes: this host, its hardware and providers
    [worker] = jobs.list_workers()
    at = open_page("home")
    workers = at.dataframe[0].value
    assert list(workers["worker"]) == ["w-1"]
    assert list(workers["host"]) == [socket.gethostname()]
    assert list(workers["CPU"]) == [worker.hardware.get("cpu", "?")]
    assert "onnxruntime:cpu" in workers["providers"].iloc[0]
    assert "No worker is alive" not in texts(at)
    # what a team asks before uploading: what the worker runs untrusted models under
    guarded = isolation.this_host().summary()
    assert guarded.startswith("bubblewrap sandbox")
    assert [c.value for c in at.caption if "Untrusted models" in c.value] == [
        plain(f"Untrusted models run under: {guarded} (w-1).")
    ]
    assert not at.warning


def test_a_worker_on_a_host_with_less_is_a_warning_naming_what_is_missing(data_dir: Path) -> None:
    """What a worker registers from a host where the sandbox cannot start and no pids cgroup
    exists, measured for real inside the sandbox (tests/backend/launch/test_isolation.py)."""
    less = in_sandbox("isolation_here")
    worker_store.register_worker("w-2", "bare-host", 1, {"isolation": less}, {})

    at = open_page("home")

    [warning] = [w.value for w in at.warning]
    assert warning.startswith(plain("Untrusted models run under: NOT SANDBOXED (the bubblewrap"))
    assert warning.endswith(plain("(w-2)."))


def test_a_setting_that_does_not_read_stops_every_page_with_its_sentence(
    data_dir: Path, monkeypatch
) -> None:
    """A server started without scripts/run's check: every page said a bare ValueError from
    whichever read the setting first until 2026-12-07."""
    monkeypatch.setenv("OPTIBOARD_CONVERT_TIMEOUT_S", "ten minutes")
    at = open_page("home")
    assert not at.exception
    assert [e.value for e in at.error] == [
        "OPTIBOARD_CONVERT_TIMEOUT_S='ten minutes' is not a number; set it again, or unset it "
        "for the default (600). docs/settings.md says what it is for."
    ]
    assert "Nothing here yet" not in texts(at)
