"""Triton serving under a runtime environment: the served model runs on the environment's own
onnxruntime (ort-1.31, made by scripts/setup-runtime-env) inside .triton-venv's Python backend,
and every load point says which version ran; default serves .triton-venv's own."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import shutil
from pathlib import Path

import pytest

from backend import runtimeenvs
from backend.cli import main
from backend.errors import UnavailableError
from backend.models.ingest import ingest_file
from backend.serving.server import TritonEnvironment, serve
from backend.serving.types import LoadPoint
from tests import runtime_envs
from tests.backend.serving.conftest import POLICY


def _triton_venv_onnxruntime(environment: TritonEnvironment) -> str:
    """The onnxruntime version .triton-venv holds, from its own dist-info."""
    site = [str(p) for p in environment.venv.glob("lib/python3*/site-packages")]
    return next(md.distributions(name="onnxruntime", path=site)).version


def test_serve_load_on_an_environment_reports_its_onnxruntime_and_default_the_serving_venvs(
    data_dir: Path,
    mlp_path: Path,
    triton_environment: TritonEnvironment,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runtime_envs.set_up("ort-1.31")
    own = _triton_venv_onnxruntime(triton_environment)
    assert own != "1.31.1"  # else the test could not tell the two apart
    model = ingest_file(mlp_path, "mlp.onnx")
    argv = ["serve", "load", str(model.id), "--concurrency", "2", "--duration", "0.4"]
    argv += ["--preset", "quick"]
    assert main([*argv, "--env", "ort-1.31", "--json"]) == 0
    point = LoadPoint.from_dict(json.loads(capsys.readouterr().out.splitlines()[0]))
    assert (point.runtime_env, point.onnxruntime) == ("ort-1.31", "1.31.1")
    assert point.runtime_label == "onnxruntime 1.31.1 (ort-1.31)"
    assert point.errors == 0 and point.latency.count > 0  # 1.31.1 answered on numpy<2
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("policy: max 16, delay 0 us, x1; provider cpu (session: CPUExec")
    assert f"; onnxruntime {own} (default)\n" in out.splitlines(keepends=True)[0]
    curve = ["serve", "curve", str(model.id), "--batch-sizes", "1,2", "--requests", "3"]
    assert main([*curve, "--env", "ort-1.31"]) == 0
    assert capsys.readouterr().out.startswith("served on onnxruntime 1.31.1 (ort-1.31)\n")


def test_a_server_that_loads_another_version_than_the_pins_is_refused(
    tmp_path: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An environment whose site-packages holds ort-1.31's onnxruntime (1.31.1) but whose pins
    say 1.30.0: the server starts, the model logs 1.31.1, and serve() refuses it."""
    real = runtimeenvs.get_env("ort-1.31")
    pins = tmp_path / "ort-x.txt"
    pins.write_text("onnxruntime==1.30.0\n")
    root = tmp_path / "ort-x"
    site = root / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to(real.python)
    (root / ".installed").write_text("made by this test\n")
    (root / "pins.txt").write_text(pins.read_text())
    real_site = next(real.root.glob("lib/python3*/site-packages"))  # type: ignore[union-attr]
    # linked file by file (one file system): the sandbox binds this site-packages only
    shutil.copytree(real_site / "onnxruntime", site / "onnxruntime", copy_function=os.link)
    wrong = runtimeenvs.RuntimeEnv("ort-x", pins, root)
    monkeypatch.setitem(runtimeenvs.ENVIRONMENTS, "ort-x", wrong)
    with pytest.raises(UnavailableError) as refused:
        with serve(mlp_path, POLICY, runtime_env="ort-x"):
            pass
    assert str(refused.value).startswith("Triton's Python backend loaded onnxruntime 1.31.1 from ")
    assert str(refused.value).endswith(
        "not the onnxruntime 1.30.0 that runtime environment 'ort-x' pins; run "
        "scripts/setup-runtime-env ort-x again."
    )
