"""The compatibility matrix opens an uploaded model only in sandboxed children: its placement
sessions (ONNX Runtime) and its columns' reads of the model (onnx's function builders, OpenVINO's
read_model and compile_model) never run in the dashboard's or the worker's process, nor in a
plain child that sees the data folder and the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import settings
from backend.compat.build import build_matrix_in_child, matrix_for_model
from backend.compat.placement import Placement
from backend.errors import UserError
from backend.models.ingest import ingest_file
from tests import models as model_factory
from tests.bwrap_calls import child_calls, logging_bwrap


def test_the_matrix_and_its_placement_read_the_upload_only_in_sandboxed_children(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = logging_bwrap(tmp_path, monkeypatch)
    folder = tmp_path / "library" / "mlp"
    path = model_factory.save_with_external_data(model_factory.make_mlp(), folder)
    before = sorted(p.name for p in folder.iterdir())

    matrix = build_matrix_in_child(path)

    placement = matrix.placements["ort-cpu"]
    assert placement.ok, placement.error
    assert placement.counts == {"CPUExecutionProvider": 6}  # its weights read where they lie
    assert len(matrix.nodes) == 6
    assert all("(query_model)" in cell.reason for cell in matrix.cells["openvino"])  # it ran
    calls = child_calls(log)
    assert len(calls) == 2, calls  # the placement, the matrix
    for call in calls:
        argv = call.split()
        assert "--unshare-all" in argv and "--clearenv" in argv and "--share-net" not in argv
        assert f"--ro-bind {folder} {folder}" in call
        assert str(data_dir) not in call  # never the database or the other models
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing copied or left beside


def test_without_a_working_sandbox_no_placement_session_is_opened_and_the_matrix_says_why(
    data_dir: Path, mlp_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-bwrap"
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(missing))

    matrix = build_matrix_in_child(mlp_path)

    placement = matrix.placements["ort-cpu"]
    assert placement.error == (
        "not placed: a session opens the uploaded model only inside the sandbox, and the "
        f"bubblewrap sandbox ({str(missing)!r}) is not installed; install the Debian package "
        "bubblewrap or set OPTIBOARD_BWRAP to its path"
    )
    assert placement.nodes == {} and placement.counts == {}
    assert len(matrix.nodes) == 6  # the prediction still stands, as an upload's parsing does


def test_a_matrix_cached_without_a_sandbox_is_placed_for_real_once_one_works(
    data_dir: Path, mlp_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(tmp_path / "no-bwrap"))
    assert matrix_for_model(model.id).placements["ort-cpu"].error.startswith("not placed:")
    monkeypatch.delenv("OPTIBOARD_BWRAP")  # bubblewrap installed since

    placement = matrix_for_model(model.id).placements["ort-cpu"]

    assert placement.ok and placement.counts == {"CPUExecutionProvider": 6}


def _in_a_fresh_process(code: str, model: Path) -> str:
    """What `python -c code model` printed, as the dashboard's process would run it."""
    root = str(settings.PROJECT_ROOT)
    done = subprocess.run(
        [sys.executable, "-c", code, str(model)],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_building_a_matrix_loads_no_runtime_into_the_calling_process(
    data_dir: Path, mlp_path: Path
) -> None:
    """The dashboard asks for a matrix: ONNX Runtime (about 140 MB with its provider probe) and
    OpenVINO load only in its children."""
    code = (
        "import sys; from pathlib import Path; "
        "from backend.compat.build import build_matrix_in_child; "
        "m = build_matrix_in_child(Path(sys.argv[1])); "
        "print(m.placements['ort-cpu'].counts, 'onnxruntime' in sys.modules, "
        "'openvino' in sys.modules)"
    )
    assert _in_a_fresh_process(code, mlp_path) == "{'CPUExecutionProvider': 6} False False"


def test_a_failed_provider_probe_is_said_on_the_cpu_column_and_tried_again_next_time(
    data_dir: Path, mlp_path: Path
) -> None:
    """In a fresh process (the dashboard's case: no ONNX Runtime loaded), a probe child that
    cannot start ONNX Runtime under a tiny memory limit; then the same process with the limit
    lifted. Until 2026-12-07 the failure placed nothing and said nothing, for the process's
    whole life."""
    code = (
        "import os, sys; from pathlib import Path; "
        "from backend.compat.build import real_placements; "
        "os.environ['OPTIBOARD_CHILD_MEMORY_MB'] = '40'; "
        "first = real_placements(Path(sys.argv[1])); "
        "del os.environ['OPTIBOARD_CHILD_MEMORY_MB']; "
        "second = real_placements(Path(sys.argv[1])); "
        "print(sorted(first), first['ort-cpu'].error); "
        "print(sorted(second), second['ort-cpu'].counts)"
    )
    first, second = _in_a_fresh_process(code, mlp_path).splitlines()
    assert first == (
        "['ort-cpu'] not placed: probing ONNX Runtime's providers failed (the service's log has "
        "its traceback)"
    )  # numpy's import fails under 40 MB of address space: no server path on the page
    assert second == "['ort-cpu'] {'CPUExecutionProvider': 6}"


def test_a_placement_child_is_believed_only_when_its_answer_reads_as_a_placement() -> None:
    real = Placement(
        "CPUExecutionProvider",
        ["CPUExecutionProvider"],
        {"MatMul_0": "CPUExecutionProvider"},
        {"CPUExecutionProvider": 1},
    )
    assert Placement.from_child(real.to_dict()) == real
    wrong = [
        None,
        ["CPUExecutionProvider"],
        {**real.to_dict(), "extra": 1},
        {**real.to_dict(), "counts": {"CPUExecutionProvider": "1"}},
        {**real.to_dict(), "nodes": {"MatMul_0": ["CPUExecutionProvider"]}},
        {**real.to_dict(), "inserted": True},
        {k: v for k, v in real.to_dict().items() if k != "error"},
    ]
    for answer in wrong:
        with pytest.raises(ValueError):
            Placement.from_child(answer)


def test_a_matrix_child_stopped_on_the_upload_is_one_sentence_for_the_page(
    data_dir: Path, mlp_path: Path
) -> None:
    """What the Compatibility page and the graph overlay catch: a UserError (a RuntimeError
    drew Streamlit's bare error box there)."""
    with pytest.raises(UserError) as refused:
        build_matrix_in_child(mlp_path, timeout=0.2)

    assert str(refused.value) == (
        "Building the compatibility matrix took longer than 0.2 s and was stopped; try a "
        "smaller file."
    )
