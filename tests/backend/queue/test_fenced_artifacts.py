"""A worker that lost its job leaves no blob behind; one still referenced by a row stays.

Real SQLite file, real ONNX Runtime run, real lease takeover through claim_job on the database's
clock, and the worker's own store step (JobContext.store_result).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from backend.engine.run import ConfigurationTask, run_configuration
from backend.jobs.context import JobContext
from backend.launch.children import run_in_child
from backend.models import library
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.results import ConfigurationResult
from backend.specs import Configuration, MeasureSettings, SweepSpec
from storage.artifacts import ArtifactStore
from storage.repo import jobs as job_store
from storage.repo import results as result_store

TINY = MeasureSettings(
    warmup_runs=1, window_runs=5, window_min_seconds=0.01, max_seconds=1, accuracy_samples=1
)
PATH_KEYS = ("optimized_path", "ort_optimized_path", "profile_path")


def _measure(source: Path, output: Path) -> ConfigurationResult:
    config = Configuration(precision="fp32", provider="cpu", batch_size=1)  # type: ignore[arg-type]
    task = ConfigurationTask(
        source_path=str(source),
        configuration=config,
        measure=TINY,
        output_dir=str(output),
    )
    outcome = run_in_child(run_configuration, task, timeout_s=120)
    assert outcome.ok, outcome.error
    return outcome.value


def _copy(result: ConfigurationResult, folder: Path) -> ConfigurationResult:
    """The same result with its produced files copied (byte for byte) into `folder`."""
    folder.mkdir()
    copied = ConfigurationResult.from_dict(result.to_dict())
    for key in PATH_KEYS:
        if copied.environment.get(key):
            target = folder / Path(copied.environment[key]).name
            shutil.copyfile(copied.environment[key], target)
            copied.environment[key] = str(target)
    return copied


def _blobs(data_dir: Path) -> set[str]:
    return {p.name for p in (data_dir / "artifacts").glob("??/*")}


def test_refused_result_write_leaves_no_blob_and_never_takes_a_referenced_one(
    data_dir: Path, mlp_path: Path, tmp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    spec = SweepSpec(precisions=("fp32",), providers=("cpu",), batch_sizes=(1,), measure=TINY)
    job = jobs.submit_sweep(model.id, spec)
    stale = job_store.claim_job("w1", lease_seconds=-1)  # w1 stops answering: lease over
    fresh = job_store.claim_job("w2", lease_seconds=60)  # w2 takes the job over
    assert (stale.id, fresh.id, fresh.attempts) == (job.id, job.id, 2)
    measured = _measure(library.onnx_path(model.id), tmp_path / "run")
    before = _blobs(data_dir)

    late = _copy(measured, tmp_path / "late")
    assert JobContext(stale, ArtifactStore()).store_result(late) is None

    assert result_store.list_results(job_ids=[job.id]) == []
    assert _blobs(data_dir) == before  # nothing w1 copied stays in the store
    assert [a.kind for a in library.list_artifacts(model.id)] == ["original"]
    assert not any(Path(late.environment.get(k) or "/nonexistent").exists() for k in PATH_KEYS)

    stored = JobContext(fresh, ArtifactStore()).store_result(_copy(measured, tmp_path / "owner"))

    (row,) = result_store.list_results(job_ids=[job.id])
    assert stored is not None and stored.id == row.id  # the result as stored, for the plan
    linked = {a.sha256 for a in library.list_artifacts(model.id) if a.kind != "original"}
    assert row.payload["optimized_sha256"] in linked
    assert linked and linked <= _blobs(data_dir)

    # w1 comes back once more with identical files: refused, and w2's blobs stay
    assert (
        JobContext(stale, ArtifactStore()).store_result(_copy(measured, tmp_path / "again")) is None
    )

    assert len(result_store.list_results(job_ids=[job.id])) == 1
    assert linked <= _blobs(data_dir)
    for sha in linked:
        assert library.artifact_path(sha).is_file()
