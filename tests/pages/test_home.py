"""Home page: empty library, a populated one, and the worker list."""

from __future__ import annotations

import socket
from pathlib import Path

from sqlalchemy import delete, update

from backend.launch import isolation
from backend.queue import jobs
from backend.queue.worker import register
from storage.db import session_scope
from storage.schema import Job
from storage.states import JobState
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
    guarded = workers["untrusted models run under"].iloc[
        0
    ]  # what a team asks: is it safe to upload
    assert guarded == isolation.this_host().summary() and guarded.startswith("bubblewrap sandbox")
    assert "No worker is alive" not in texts(at)
