"""The user's evaluation set on the pages: which set scored each configuration, and its accuracy
on the Compare page; a reopened sweep keeps it on the Optimize page."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from backend.cli import main
from backend.models import library
from backend.queue import jobs
from tests.pages.seed import add_model, open_page, run_queued


def test_compare_shows_task_accuracy_and_which_sets_were_used_and_optimize_keeps_them(
    data_dir: Path, mlp_path: Path, tmp_path: Path
) -> None:
    model = add_model(mlp_path, "mlp")
    rng = np.random.default_rng(3)
    calib, holdout = tmp_path / "calib.npz", tmp_path / "holdout.npz"
    np.savez(calib, x=rng.normal(size=(4, 16)).astype(np.float32))
    np.savez(holdout, x=rng.normal(size=(6, 16)).astype(np.float32), labels=np.arange(6))
    argv = ["submit", str(model.id), "--precisions", "fp32,int8_static", "--quick"]
    assert main([*argv, "--calibration", str(calib), "--evaluation", str(holdout)]) == 0
    [job] = jobs.list_jobs()
    run_queued()

    at = open_page("compare", jobs=job.id)
    assert not at.exception
    table = at.dataframe[0].value.set_index("label")
    assert set(table["evaluation_set"]) == {"holdout.npz"}
    int8 = table[table.index.str.contains("INT8")].iloc[0]
    assert int8["calibration_set"] == "calib.npz"
    fp32 = table[table.index.str.contains("FP32")].iloc[0]
    # the labels are arbitrary here, so FP32's top-1 is whatever its argmax gets; agreement is 1
    assert fp32["eval_top1_agreement"] == 1.0
    assert 0.0 <= fp32["eval_top1_accuracy"] <= 1.0

    # the accuracy axis of the Pareto chart can be the task accuracy on the evaluation set
    at.selectbox(key="url_loss").select("eval_top1_error").run()
    assert not at.exception
    view = at.dataframe[0].value
    assert list(view["accuracy_loss"]) == list(1.0 - table.loc[view["label"], "eval_top1_accuracy"])

    link = {"model": model.id, **jobs.spec_to_query(jobs.spec_of(job)), "from_job": job.id}
    at = open_page("optimize", **link)
    assert not at.exception
    assert at.radio(key="evaluation_source").value == "stored"
    options = at.radio(key="evaluation_source").options
    assert any(o.endswith(": holdout\\.npz") for o in options)  # the name, Markdown-escaped
    at.button(key="submit_sweep").click().run()
    assert jobs.spec_of(jobs.list_jobs()[0]) == jobs.spec_of(job)


def test_the_calibration_file_as_evaluation_set_is_refused_in_one_sentence(
    data_dir: Path, mlp_path: Path, tmp_path: Path, capsys
) -> None:
    model = add_model(mlp_path, "mlp")
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=np.ones((4, 16), np.float32))
    argv = ["submit", str(model.id), "--precisions", "fp32,int8_static", "--quick"]
    assert main([*argv, "--calibration", str(calib), "--evaluation", str(calib)]) != 0
    assert "same file as the calibration set" in capsys.readouterr().err
    assert [a.kind for a in library.list_artifacts(model.id)].count("evaluation") == 0
    assert jobs.list_jobs() == []
