"""The job kind and launcher registries: a stored job finds its kind by its row's kind column
(every creator sets it; a study's spec still says "serving" for older workers, a sweep's names
no kind), Ray is chosen only for a kind that runs there, and a kind this worker does not know
fails the job in one sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.errors import UserError
from backend.jobs.kinds import KINDS, kind_of
from backend.jobs.launchers import LAUNCHERS, launcher_for
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.queue.worker import JobRunner
from backend.records import is_serving, job_kind
from backend.serving.study import ServedVariant, ServingStudy, submit_study
from backend.serving.types import BatchingPolicy, LoadSpec, Scenario
from backend.specs import SweepSpec
from storage.repo import jobs as job_store
from storage.repo import results as result_store
from storage.states import JobState


def _study() -> ServingStudy:
    return ServingStudy(
        variants=(ServedVariant(),),
        policies=(BatchingPolicy(max_batch_size=4),),
        loads=(LoadSpec(Scenario.CONCURRENCY, duration_s=1.0, concurrency=2),),
        slo_p99_ms=50.0,
    )


def test_stored_sweeps_and_studies_find_their_kind_and_launcher(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    sweep = jobs.submit_sweep(model.id, SweepSpec(precisions=("fp32",)))
    study = submit_study(model.id, _study())
    assert (sweep.kind, study.kind) == ("sweep", "serving")
    assert "kind" not in sweep.spec  # as every sweep was stored before the registry
    assert study.spec["kind"] == "serving"  # still written: older workers read it there
    assert (kind_of(sweep).name, kind_of(study).name) == ("sweep", "serving")
    assert set(KINDS) == {"sweep", "serving", "generation", "regression"}
    assert set(LAUNCHERS) == {"local", "ray"}

    monkeypatch.delenv("OPTIBOARD_RAY_ADDRESS", raising=False)
    assert launcher_for(kind_of(sweep)).name == "local"
    monkeypatch.setenv("OPTIBOARD_RAY_ADDRESS", "127.0.0.1:6379")
    assert launcher_for(kind_of(sweep)).name == "ray"
    assert launcher_for(kind_of(study)).name == "local"  # Triton runs on this host


def test_a_job_of_a_kind_this_worker_does_not_know_fails_in_one_sentence(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    job = job_store.create_job(model.id, {}, total=1, kind="distillation")  # the column decides
    claimed = job_store.claim_job("inline", 60, job_id=job.id)
    with pytest.raises(UserError, match="does not run jobs of kind 'distillation'"):
        kind_of(claimed)
    with pytest.raises(UserError, match="Job .* is of kind 'distillation', which this version"):
        job_kind(claimed)
    assert not is_serving(claimed)

    outcome = JobRunner("inline").run(claimed)

    assert outcome.state == JobState.FAILED
    finished = jobs.get_job(job.id)
    assert finished.state == JobState.FAILED
    assert finished.error == (
        "This worker does not run jobs of kind 'distillation' (it runs sweep, serving, "
        "generation, regression); update "
        "the worker to this version of Optiboard and retry the job."
    )
    assert result_store.list_results(job_ids=[job.id]) == []


def test_a_retried_job_keeps_its_kind(data_dir: Path, mlp_path: Path) -> None:
    """Retry copies the row's kind with its spec: a retried study is a study again, not the
    column's default sweep."""
    model = ingest_file(mlp_path, "mlp.onnx")
    study = submit_study(model.id, _study())
    assert jobs.cancel_job(study.id) == JobState.CANCELLED  # finished: retry takes only those
    again = jobs.retry_job(study.id)
    assert again.id != study.id and again.kind == "serving" == kind_of(again).name
