"""Submitting, listing, cancelling and retrying sweeps; job state transitions live in storage."""

from __future__ import annotations

from pathlib import Path

from backend.config import SweepSpec
from backend.errors import UserError
from backend.library import get_model
from storage import repository
from storage.repository import EventRow, JobRow, ResultRow
from storage.schema import JobState


def submit_sweep(model_id: int, spec: SweepSpec, label: str | None = None) -> JobRow:
    """Queue one job holding every configuration of the sweep."""
    get_model(model_id)
    configurations = spec.configurations()
    return repository.create_job(model_id, spec.to_dict(), total=len(configurations), label=label)


def get_job(job_id: int) -> JobRow:
    job = repository.get_job(job_id)
    if job is None:
        raise UserError(f"There is no job {job_id}; list jobs to see which exist.")
    return job


def list_jobs(
    model_id: int | None = None, states: list[JobState] | None = None, limit: int | None = None
) -> list[JobRow]:
    return repository.list_jobs(model_id=model_id, states=states, limit=limit)


def job_counts() -> dict[str, int]:
    return repository.count_jobs_by_state()


def job_events(job_id: int, limit: int = 500) -> list[EventRow]:
    return repository.list_events(job_id, limit=limit)


def job_results(job_id: int) -> list[ResultRow]:
    return repository.list_results(job_ids=[job_id])


def cancel_job(job_id: int) -> JobState:
    get_job(job_id)
    return repository.cancel_job(job_id)


def retry_job(job_id: int) -> JobRow:
    """Queue the same sweep again as a new job (the old one and its results stay)."""
    job = get_job(job_id)
    if not job.state.finished:
        raise UserError(f"Job {job_id} is still {job.state.value}; retry it once it has finished.")
    return repository.retry_job(job_id)


def resubmit_with_changes(job_id: int, spec: SweepSpec, label: str | None = None) -> JobRow:
    job = get_job(job_id)
    return submit_sweep(job.model_id, spec, label=label or job.label)


def spec_of(job: JobRow) -> SweepSpec:
    return SweepSpec.from_dict(job.spec)


def list_workers(alive_within_seconds: float | None = 30.0) -> list[repository.WorkerRow]:
    return repository.list_workers(alive_within_seconds=alive_within_seconds)


def store_calibration(
    model_id: int,
    npz_path: Path,
    filename: str = "calibration.npz",
    symbolic_dims: dict[str, int] | None = None,
) -> str:
    """Check a calibration .npz against the model's inputs, store it, and return its sha256."""
    from backend.inputs import input_specs_of, load_calibration_npz
    from backend.library import onnx_path, store

    load_calibration_npz(
        Path(npz_path), input_specs_of(onnx_path(model_id)), dict(symbolic_dims or {})
    )
    stored = store().put_file(Path(npz_path))
    repository.add_artifact(
        model_id,
        repository.NewArtifact(
            kind="calibration",
            sha256=stored.sha256,
            size_bytes=stored.size_bytes,
            filename=filename,
        ),
    )
    return stored.sha256
