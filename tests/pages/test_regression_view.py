"""A regression check for real, ONNX Runtime 1.32.0 (default) against 1.31.1 (ort-1.31, made by
scripts/setup-runtime-env), with B running a planted regression (a chain of MatMuls whose result is
multiplied by zero into the output): the CLI finds it slower and names MatMul; the Compare page's
regression view and the Jobs page show the same check."""

from __future__ import annotations

from pathlib import Path

from backend.queue import jobs
from tests import models, runtime_envs
from tests.backend.test_cli import ROOT, optiboard
from tests.pages.seed import open_page, texts


def test_a_real_check_and_a_planted_regression_found_with_its_op_named_and_shown(
    data_dir: Path, tmp_path: Path
) -> None:
    runtime_envs.set_up("ort-1.31")
    mlp = models.save(models.make_mlp(), tmp_path / "mlp.onnx")
    planted_path = models.save(models.plant_matmul_chain(models.make_mlp()), tmp_path / "p.onnx")
    assert optiboard("add", str(mlp)).returncode == 0
    assert optiboard("add", str(planted_path)).returncode == 0

    args = ["--env-b", "ort-1.31", "--model-b", "2", "--max-seconds", "2"]
    run = optiboard("regress", "1", *args)
    assert run.returncode == 0, run.stdout + run.stderr
    row = next(line for line in run.stdout.splitlines() if line.startswith("onnxruntime/"))
    assert "default 1.32.0" in row and "ort-1.31 1.31.1" in row  # the versions that really ran
    assert " slower " in row and "1.000000" in row  # outputs agree: the chain adds x * 0
    assert "slower; ops whose time changed most (A -> B):" in run.stdout
    first_op = run.stdout.split("(A -> B):\n")[1].splitlines()[0].strip()
    assert first_op.startswith("MatMul: "), run.stdout

    key = "onnxruntime/cpu/fp32/b1/fixed/all/t0"
    stored = {r.config_key: r.result for r in jobs.stored_results(1)}
    a, b = stored[f"a:default:{key}"], stored[f"b:ort-1.31:{key}"]
    assert (a.environment["runtime_env"], b.environment["runtime_env"]) == ("default", "ort-1.31")
    assert b.environment["runtime_file"].startswith(str(ROOT / ".runtime-envs" / "ort-1.31"))
    assert b.environment["pins"] == ["onnxruntime==1.31.1"]
    assert b.telemetry["profile_sha256"] and a.telemetry["profile_sha256"]
    assert b.environment["regression"]["verdict"] == "slower"

    at = open_page("compare", view="regression", jobs=1)
    assert not at.exception, at.exception
    shown = texts(at)
    assert "is slower than default" in shown, shown
    rule = "same the whole interval within 5% of 1 (else unclear)"
    assert rule in shown.replace("\\", ""), shown  # the CLI's footnote says the same
    assert "running model 2" in shown
    table = at.dataframe[0].value
    assert table["verdict"].tolist() == ["🔻 slower"] and table["B"].tolist() == ["ort-1.31 1.31.1"]
    assert table["processes A/B"].tolist() == ["5/5"]  # each side in five processes
    plain = shown.replace("\\", "")  # the page escapes Markdown
    assert "; A in 5 processes: " in plain and "; B in 5 processes: " in plain, plain
    ort_131 = ROOT / ".runtime-envs" / "ort-1.31"
    assert f"B (ort-1.31): onnxruntime 1.31.1 from {ort_131}/lib/" in plain, plain
    assert "A (default): onnxruntime 1.32.0 from /" in plain and "A (default)" in run.stdout
    assert at.dataframe[1].value["op"].tolist()[0] == "MatMul"  # the diff, open for slower

    board = open_page("jobs", job=1)
    assert not board.exception, board.exception
    frames = [d.value for d in board.dataframe if "why / error" in d.value.columns]
    labels = frames[0]["configuration"].tolist()
    assert labels == ["A default: CPU FP32 b1", "B ort-1.31: CPU FP32 b1"], labels
