"""The regression check for real through the CLI: an A/A check says same; refusals store
nothing. (ONNX Runtime 1.32.0 against 1.31.1 with a planted regression, and the pages that show
it: tests/pages/test_regression_view.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend import runtimeenvs as environments
from backend.errors import UserError
from backend.jobs.regression import run_pair
from backend.jobs.regressspec import RegressionSpec, submit_regression
from backend.models.ingest import ingest_file
from backend.queue import jobs
from tests.backend.test_cli import optiboard


def test_an_a_a_check_says_same(data_dir: Path, mlp_path: Path) -> None:
    assert optiboard("add", str(mlp_path)).returncode == 0
    run = optiboard("regress", "1", "--env-b", "default", "--no-profile", "--max-seconds", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    row = next(line for line in run.stdout.splitlines() if line.startswith("onnxruntime/"))
    assert " same " in row and "default 1.32.0" in row, run.stdout
    report = optiboard("regress", "--report", "1")
    assert report.stdout == run.stdout.split("\n", 1)[1].rsplit("\n\njob 1", 1)[0] + "\n"
    shown = optiboard("show", "1")
    assert shown.returncode == 0, shown.stderr
    assert report.stdout in shown.stdout  # show prints the same report under the results table


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


def test_a_pair_on_an_environment_this_host_lacks_fails_in_one_sentence_before_any_child(
    tmp_path: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = environments.RuntimeEnv("ort-9", tmp_path / "ort-9.txt", tmp_path / "nothing")
    monkeypatch.setitem(environments.ENVIRONMENTS, "ort-9", missing)
    spec = RegressionSpec(env_b="ort-9")  # queued where it was set up, claimed where it is not
    with pytest.raises(UserError, match=r"^Runtime environment 'ort-9' is not set up; run "):
        run_pair(spec, spec.configurations()[0], {"a": mlp_path, "b": mlp_path}, tmp_path)
    assert not (tmp_path / "a").exists()  # no side was started


def test_an_environment_made_from_other_pins_says_so(tmp_path: Path) -> None:
    pins = tmp_path / "ort-8.txt"
    pins.write_text("onnxruntime==1.31.1\n")
    root = tmp_path / "env"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("")
    env = environments.RuntimeEnv("ort-8", pins, root)
    assert env.unavailable() == (
        "Runtime environment 'ort-8' was not set up completely; run "
        "scripts/setup-runtime-env ort-8 on the worker's host."
    )
    (root / ".installed").write_text("digest\n")
    (root / "pins.txt").write_text("onnxruntime==1.30.0\n")
    assert env.unavailable() is not None and "was set up from other pins" in env.unavailable()
    (root / "pins.txt").write_text(pins.read_text())
    assert env.unavailable() is None and env.pinned == ["onnxruntime==1.31.1"]
