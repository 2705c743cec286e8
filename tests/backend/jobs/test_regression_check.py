"""The regression check for real: ONNX Runtime 1.32.0 (default) against 1.31.1 (ort-1.31, made by
scripts/setup-runtime-env) on a tiny model, an A/A check, and a planted regression, through the
CLI over a real data directory; then the refusals, which store nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from backend import runtimeenvs as environments
from backend.errors import UserError
from backend.jobs.regressspec import RegressionSpec, submit_regression
from backend.models.ingest import ingest_file
from backend.queue import jobs
from tests import models
from tests.backend.test_cli import ROOT, optiboard


@pytest.fixture(scope="module")
def second_env() -> str:
    """ort-1.31 set up (skipped in seconds when its stamp matches; scripts/test makes it)."""
    subprocess.run([str(ROOT / "scripts" / "setup-runtime-env"), "ort-1.31"], check=True)
    return "ort-1.31"


def test_a_real_check_and_a_planted_regression_found_with_its_op_named(
    data_dir: Path, tmp_path: Path, second_env: str
) -> None:
    mlp = models.save(models.make_mlp(), tmp_path / "mlp.onnx")
    planted = models.plant_matmul_chain(models.make_mlp())
    planted_path = models.save(planted, tmp_path / "mlp-planted.onnx")
    assert optiboard("add", str(mlp)).returncode == 0
    assert optiboard("add", str(planted_path)).returncode == 0

    run = optiboard("regress", "1", "--env-b", second_env, "--model-b", "2", "--max-seconds", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    row = next(line for line in run.stdout.splitlines() if line.startswith("onnxruntime/"))
    assert "default 1.32.0" in row and "ort-1.31 1.31.1" in row  # the versions that really ran
    assert " slower " in row and "1.000000" in row  # outputs agree: the chain adds x * 0
    assert "slower; ops whose time changed most (A -> B):" in run.stdout
    first_op = run.stdout.split("(A -> B):\n")[1].splitlines()[0].strip()
    assert first_op.startswith("MatMul: "), run.stdout

    stored = {r.config_key: r.result for r in jobs.stored_results(1)}
    a = stored["a:default:onnxruntime/cpu/fp32/b1/fixed/all/t0"]
    b = stored["b:ort-1.31:onnxruntime/cpu/fp32/b1/fixed/all/t0"]
    assert (a.environment["runtime_env"], b.environment["runtime_env"]) == ("default", "ort-1.31")
    assert b.environment["runtime_file"].startswith(str(ROOT / ".runtime-envs" / "ort-1.31"))
    assert b.environment["pins"] == ["onnxruntime==1.31.1"]
    assert b.telemetry["profile_sha256"] and a.telemetry["profile_sha256"]
    assert b.environment["regression"]["verdict"] == "slower"


def test_an_a_a_check_says_same(data_dir: Path, mlp_path: Path) -> None:
    assert optiboard("add", str(mlp_path)).returncode == 0
    run = optiboard("regress", "1", "--env-b", "default", "--no-profile", "--max-seconds", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    row = next(line for line in run.stdout.splitlines() if line.startswith("onnxruntime/"))
    assert " same " in row and "default 1.32.0" in row, run.stdout
    report = optiboard("regress", "--report", "1")
    assert report.stdout == run.stdout.split("\n", 1)[1].rsplit("\n\njob 1", 1)[0] + "\n"


def test_bad_environments_get_one_sentence_and_queue_nothing(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    with pytest.raises(UserError, match=r"^There is no runtime environment 'ort-0.1'; choose"):
        submit_regression(model.id, RegressionSpec(env_b="ort-0.1"))
    missing = environments.RuntimeEnv("ort-9", tmp_path / "ort-9.txt", tmp_path / "nothing")
    monkeypatch.setitem(environments.ENVIRONMENTS, "ort-9", missing)
    with pytest.raises(
        UserError,
        match=r"^Runtime environment 'ort-9' is not set up; run scripts/setup-runtime-env ort-9 ",
    ):
        submit_regression(model.id, RegressionSpec(env_b="ort-9"))
    with pytest.raises(UserError, match="^There is no model 7;"):
        submit_regression(7, RegressionSpec(env_b="default"))
    with pytest.raises(UserError, match="^Unknown precision 'fp8'"):
        RegressionSpec(env_b="default", precisions=("fp8",))
    assert jobs.list_jobs() == []
