"""Submitting, listing, cancelling and retrying sweeps; job state transitions live in storage."""

from __future__ import annotations

from pathlib import Path

from backend.errors import UserError
from backend.models.library import get_model
from backend.specs import SweepSpec
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.repo import workers as worker_store
from storage.repo.jobs import EventRow, JobRow
from storage.repo.results import ResultRow
from storage.states import JobState


def submit_sweep(model_id: int, spec: SweepSpec, label: str | None = None) -> JobRow:
    """Queue one job holding every configuration of the sweep."""
    get_model(model_id)
    configurations = spec.configurations()
    return job_store.create_job(model_id, spec.to_dict(), total=len(configurations), label=label)


def get_job(job_id: int) -> JobRow:
    job = job_store.get_job(job_id)
    if job is None:
        raise UserError(f"There is no job {job_id}; list jobs to see which exist.")
    return job


def list_jobs(
    model_id: int | None = None, states: list[JobState] | None = None, limit: int | None = None
) -> list[JobRow]:
    return job_store.list_jobs(model_id=model_id, states=states, limit=limit)


def job_counts() -> dict[str, int]:
    return job_store.count_jobs_by_state()


def job_events(job_id: int, limit: int = 500) -> list[EventRow]:
    return job_store.list_events(job_id, limit=limit)


def job_results(job_id: int) -> list[ResultRow]:
    return result_store.list_results(job_ids=[job_id])


def cancel_job(job_id: int) -> JobState:
    get_job(job_id)
    return job_store.cancel_job(job_id)


def retry_job(job_id: int) -> JobRow:
    """Queue the same sweep again as a new job (the old one and its results stay)."""
    job = get_job(job_id)
    if not job.state.finished:
        raise UserError(f"Job {job_id} is still {job.state.value}; retry it once it has finished.")
    return job_store.retry_job(job_id)


def resubmit_with_changes(job_id: int, spec: SweepSpec, label: str | None = None) -> JobRow:
    job = get_job(job_id)
    return submit_sweep(job.model_id, spec, label=label or job.label)


def spec_of(job: JobRow) -> SweepSpec:
    return SweepSpec.from_dict(job.spec)


def list_workers(alive_within_seconds: float | None = 30.0) -> list[worker_store.WorkerRow]:
    return worker_store.list_workers(alive_within_seconds=alive_within_seconds)


def store_calibration(
    model_id: int,
    npz_path: Path,
    filename: str = "calibration.npz",
    symbolic_dims: dict[str, int] | None = None,
) -> str:
    """Check a calibration .npz against the model's inputs, store it, and return its sha256."""
    from backend.engine.inputs import input_specs_of
    from backend.models.library import onnx_path, store
    from backend.models.parse import check_calibration

    # parsed in a limited child: the upload is untrusted and this may be the web process
    check_calibration(
        Path(npz_path), input_specs_of(onnx_path(model_id)), dict(symbolic_dims or {})
    )
    stored = store().put_file(Path(npz_path))
    model_store.add_artifact(
        model_id,
        model_store.NewArtifact(
            kind="calibration",
            sha256=stored.sha256,
            size_bytes=stored.size_bytes,
            filename=filename,
        ),
    )
    return stored.sha256
