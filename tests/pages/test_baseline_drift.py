"""A baseline for real: a sweep run under the ort-1.31 environment (ONNX Runtime 1.31.1, made by
scripts/setup-runtime-env) is pinned, then re-run on a re-export that plants a costly MatMul
chain; the re-run is judged against the pinned job's stored samples and its drift is flagged on
Home and Jobs with the ratio, the interval and a link to the comparison."""

from __future__ import annotations

from pathlib import Path

from backend.queue import jobs
from tests import models, runtime_envs
from tests.backend.test_cli import optiboard
from tests.pages.seed import add_model, open_page, texts


def test_a_rerun_of_a_pinned_sweep_on_a_slower_export_is_flagged_on_home_and_jobs(
    data_dir: Path, tmp_path: Path
) -> None:
    runtime_envs.set_up("ort-1.31")
    mlp = models.save(models.make_mlp(), tmp_path / "mlp.onnx")
    planted = models.save(models.plant_matmul_chain(models.make_mlp()), tmp_path / "p.onnx")
    assert (add_model(mlp).id, add_model(planted).id) == (1, 2)  # the real ingest
    sweep = ["--precisions", "fp32", "--batch-sizes", "1", "--max-seconds", "1"]
    run = optiboard("run", "1", *sweep, "--env", "ort-1.31")
    assert run.returncode == 0, run.stdout + run.stderr
    [base] = jobs.stored_results(1)
    assert base.result.environment["runtime_env"] == "ort-1.31"
    assert base.result.environment["backend_version"] == "1.31.1"  # the version that ran

    refused = optiboard("baseline", "rerun", "1")
    assert refused.returncode != 0 and "not pinned as a baseline" in refused.stderr
    assert [j.id for j in jobs.list_jobs()] == [1]  # the refusal stored nothing
    assert optiboard("baseline", "pin", "1").returncode == 0
    again = optiboard("baseline", "rerun", "1", "--model", "2")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "! CPU FP32 b1: re-run 2 (ort-1.31) / baseline 1 (ort-1.31)" in again.stdout
    assert "slower" in again.stdout and "not interleaved" in again.stdout
    [rerun] = jobs.stored_results(2)
    assert rerun.result.environment["backend_version"] == "1.31.1"
    shown = optiboard("show", "2")
    assert "re-run 2: 1 of 1 configuration beyond the interval" in shown.stdout
    listed = optiboard("baseline", "list")
    assert "cli:" in listed.stdout and "2 (succeeded)" in listed.stdout

    for page, query in (("home", {}), ("jobs", {"job": 2})):
        at = open_page(page, **query)
        assert not at.exception, at.exception
        assert (
            "Drift beyond the interval: 1 configuration of baseline job 1 moved in its newest "
            "re-run (1 slower)." in [w.value for w in at.warning]
        )
        frames = [d.value for d in at.dataframe if "re-run" in d.value.columns]
        row = frames[0].iloc[0]
        assert (row["baseline"], row["re-run"], row["verdict"]) == (1, 2, "🔻 slower")
        assert row["ratio"] > 1.05 and row["interval"].endswith("at 95%")
        assert row["comparison"] == "compare?jobs=1,2"
        assert "not interleaved" in texts(at)
