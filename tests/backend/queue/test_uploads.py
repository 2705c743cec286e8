"""Calibration uploads: checked against the model, stored; bad ones store nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend.errors import UserError
from backend.models import library
from backend.models.ingest import ingest_file
from backend.queue import uploads
from backend.specs import MEASURE_PRESETS, Precision, SweepSpec
from tests.bwrap_calls import child_calls, logging_bwrap
from tests.models import npz_bytes

INT8 = SweepSpec(precisions=(Precision.FP32, Precision.INT8_STATIC))


def _calibration_files(model_id: int) -> list[str]:
    return [a.filename for a in library.list_artifacts(model_id) if a.kind == "calibration"]


def test_an_uploaded_npz_is_stored_and_named_in_the_sweep(data_dir: Path, mlp_path: Path) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    data = npz_bytes(x=np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32))
    spec = uploads.with_calibration(INT8, model.id, data, "my-cal.npz", wanted=True)
    assert spec.calibration_sha256 is not None
    assert library.artifact_path(spec.calibration_sha256).read_bytes() == data
    assert _calibration_files(model.id) == ["my-cal.npz"]


def test_the_models_inputs_are_read_in_the_checks_sandboxed_child_not_here(
    data_dir: Path, mlp_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard's submit parsed the whole model (weights and all, up to 2 GB) in its own
    process for the inputs to check a .npz against, until 2026-12-07; one child does both now."""
    model = ingest_file(mlp_path, "mlp.onnx")
    log = logging_bwrap(tmp_path, monkeypatch)
    data = npz_bytes(x=np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32))

    uploads.with_calibration(INT8, model.id, data, "cal.npz", wanted=True)

    (call,) = child_calls(log)
    stored = library.onnx_path(model.id)
    assert f"--ro-bind {stored} {stored}" in call


def test_a_wrong_input_name_is_refused_and_nothing_is_stored(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    data = npz_bytes(not_an_input=np.zeros((8, 16), np.float32))
    with pytest.raises(UserError):
        uploads.with_calibration(INT8, model.id, data, "cal.npz", wanted=True)
    assert _calibration_files(model.id) == []


def test_choosing_upload_without_a_file_says_what_to_do(data_dir: Path, mlp_path: Path) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    with pytest.raises(UserError, match="Upload the calibration .npz, or choose random inputs"):
        uploads.with_calibration(INT8, model.id, None, None, wanted=True)


def test_random_calibration_or_no_int8_static_leaves_the_sweep_as_it_is(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    data = npz_bytes(x=np.zeros((8, 16), np.float32))
    assert uploads.with_calibration(INT8, model.id, data, "c.npz", wanted=False) == INT8
    fp32 = SweepSpec()
    assert uploads.with_calibration(fp32, model.id, data, "c.npz", wanted=True) == fp32
    assert _calibration_files(model.id) == []


def _evaluation_files(model_id: int) -> list[str]:
    return [a.filename for a in library.list_artifacts(model_id) if a.kind == "evaluation"]


def test_an_evaluation_set_with_labels_is_stored_and_scored_by_the_worker(
    data_dir: Path, mlp_path: Path
) -> None:
    from backend.queue import jobs
    from backend.queue.worker import JobRunner
    from storage.repo import jobs as job_store
    from storage.states import JobState

    model = ingest_file(mlp_path, "mlp.onnx")
    x = np.random.default_rng(1).normal(size=(6, 16)).astype(np.float32)
    data = npz_bytes(x=x, labels=np.arange(6) % 10)
    quick = MEASURE_PRESETS["quick"]
    spec = uploads.with_evaluation(SweepSpec(measure=quick), model.id, data, "holdout.npz")
    assert _evaluation_files(model.id) == ["holdout.npz"]
    assert (
        jobs.spec_from_query(jobs.spec_to_query(spec)).evaluation_sha256 == spec.evaluation_sha256
    )
    job = jobs.submit_sweep(model.id, spec)
    claimed = job_store.claim_job("inline", 300, job_id=job.id)
    assert JobRunner("inline").run(claimed).state == JobState.SUCCEEDED
    (stored,) = jobs.stored_results(job.id)
    report = stored.result.evaluation
    assert report.set_sha256 == spec.evaluation_sha256 and report.samples == 6
    assert report.top1_accuracy == report.fp32_top1_accuracy  # FP32 scored against the labels
    assert any("holdout.npz" in note for note in stored.result.notes)


def test_the_calibration_file_is_refused_as_evaluation_set_and_nothing_is_stored(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    data = npz_bytes(x=np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32))
    spec = uploads.with_calibration(INT8, model.id, data, "cal.npz", wanted=True)
    with pytest.raises(UserError, match="same file as the calibration set"):
        uploads.with_evaluation(spec, model.id, data, "cal-again.npz")
    assert _evaluation_files(model.id) == []


def test_an_evaluation_set_with_float_labels_is_refused_and_nothing_is_stored(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    data = npz_bytes(x=np.zeros((4, 16), np.float32), labels=np.zeros(4, np.float32))
    with pytest.raises(UserError, match="one integer class index per sample") as caught:
        uploads.with_evaluation(SweepSpec(), model.id, data, "eval.npz")
    assert str(caught.value).count(". ") == 0  # one sentence
    assert _evaluation_files(model.id) == []
    pickled = npz_bytes(
        x=np.zeros((4, 16), np.float32), labels=np.array([{}, 1, 2, 3], dtype=object)
    )
    with pytest.raises(UserError, match="object array"):
        uploads.with_evaluation(SweepSpec(), model.id, pickled, "eval.npz")
    assert _evaluation_files(model.id) == []
