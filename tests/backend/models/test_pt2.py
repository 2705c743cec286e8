"""PyTorch uploads: ExportedProgram .pt2 checked from its bytes and converted in the sandbox;
TorchScript, pickled modules and crafted archives refused, with real torch-written files."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from backend.errors import UserError
from backend.models import library, pt2check, pt2convert
from backend.models.ingest import ingest_file
from tests import hostile, torch_models
from tests.backend.models.test_ingest import assert_nothing_stored, reject
from tests.backend.test_cli import optiboard
from tests.bwrap_calls import child_calls, logging_bwrap

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def pt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pt2")


@pytest.fixture(scope="session")
def linear_pt2(pt2_dir: Path) -> Path:
    return torch_models.save_linear_pt2(pt2_dir / "linear.pt2")


@pytest.fixture(scope="session")
def encoder_pt2(pt2_dir: Path) -> Path:
    return torch_models.save_encoder_pt2(pt2_dir / "encoder.pt2")


def test_an_exported_program_passes_the_byte_checks(linear_pt2: Path) -> None:
    with zipfile.ZipFile(linear_pt2) as archive:
        assert pt2check.torch_kind(archive.namelist()) == "exported"
    checked = pt2check.check_archive(linear_pt2, "linear.pt2")
    assert checked.root == "linear" and checked.weights == 2 and checked.constants == 0
    assert checked.operators == ("torch.ops.aten.linear.default",)


def test_torchscript_and_pickled_modules_are_refused_by_layout_without_loading(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted = torch_models.save_torchscript(tmp_path / "cnn.pt")
    pickled = torch_models.save_pickled_module(tmp_path / "module.pth")
    legacy = tmp_path / "legacy.pt"  # torch.save's pre-zip format: a bare pickle
    import torch

    torch.save({"w": torch.zeros(2)}, legacy, _use_new_zipfile_serialization=False)
    monkeypatch.setattr(torch, "load", None)  # recognised by layout: never loaded
    monkeypatch.setattr(torch.jit, "load", None)
    how = r"torch\.export\.export\(model, example_inputs, dynamic_shapes=\.\.\.\) and save"
    reject(scripted, "cnn.pt", f"is a TorchScript archive .torch.jit.save.*{how}", data_dir)
    reject(pickled, "module.pth", f"is a pickled PyTorch model or state dict.*{how}", data_dir)
    reject(legacy, "legacy.pt", f"is a pickled PyTorch model.*{how}", data_dir)


def _marker_payload(marker: Path) -> torch_models.RunsCode:
    return torch_models.RunsCode(os.system, f"touch {marker}")


def test_a_sample_inputs_pickle_that_runs_code_is_refused_and_never_runs(
    data_dir: Path, linear_pt2: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    crafted = torch_models.with_hostile_sample_inputs(
        linear_pt2, tmp_path / "crafted.pt2", _marker_payload(marker)
    )
    reject(crafted, "crafted.pt2", "sample inputs whose pickle would call 'posix.system'", data_dir)
    assert not marker.exists()


def test_sample_inputs_with_a_huge_directory_are_refused_before_zipfile_reads_them(
    data_dir: Path, linear_pt2: Path, tmp_path: Path
) -> None:
    """Until 2026-12-07 the nested archive (up to 1 GiB) was read whole into the dashboard's
    memory and zipfile built an object per entry before any count was checked."""
    nested = hostile.huge_directory_zip(tmp_path / "inner.zip").read_bytes()  # 200,000 entries

    def change(name: str, data: bytes) -> bytes:
        return nested if name == "data/sample_inputs/model.pt" else data

    crafted = torch_models.rewrite(linear_pt2, tmp_path / "many.pt2", change)
    said = (
        r"has sample inputs that are not a plain torch\.save archive \(the zip holds 200000 "
        r"entries, more than the limit of 10000\)"
    )
    reject(crafted, "many.pt2", said, data_dir)


def _target(graph: dict, target: str) -> None:
    graph["graph_module"]["graph"]["nodes"][0]["target"] = target


def _expression(graph: dict, expression: str) -> None:
    graph["graph_module"]["graph"]["sym_int_values"] = {
        "s0": {"as_expr": {"expr_str": expression, "hint": None}}
    }


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda g: _target(g, "torch.os.system"), "calls 'torch.os.system', which is not a torch"),
        (lambda g: _target(g, "builtins.exec"), "calls 'builtins.exec'"),
        (
            lambda g: _expression(g, "__import__('os').system('touch x')"),
            "the name '__import__' in a size expression",
        ),
        (
            lambda g: _expression(g, "Symbol('s0').__class__"),
            r"the operator '\.' in a size expression",
        ),
    ],
    ids=["attribute-target", "builtin-target", "eval-in-sympify", "attribute-in-expression"],
)
def test_a_graph_that_would_run_python_is_refused(
    linear_pt2: Path, tmp_path: Path, edit, message: str
) -> None:
    crafted = torch_models.with_graph(linear_pt2, tmp_path / "graph.pt2", edit)
    with pytest.raises(UserError, match=message):
        pt2check.check_archive(crafted, "graph.pt2")


def test_an_uploaded_pt2_is_checked_in_a_sandboxed_child_not_in_the_uploading_process(
    data_dir: Path, linear_pt2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph's JSON (up to 256 MiB), configs and pickle were read in the web process until
    2026-12-07; the refusal keeps its sentence."""
    crafted = torch_models.with_graph(
        linear_pt2, tmp_path / "graph.pt2", lambda g: _target(g, "builtins.eval")
    )
    log = logging_bwrap(tmp_path, monkeypatch)

    reject(crafted, "graph.pt2", r"builtins\.eval", data_dir)

    (call,) = child_calls(log)  # the check's, refused there: no conversion child
    program = str(crafted.resolve())
    assert f"--ro-bind {program} {program}" in call and " call " in call


def _pickled_weight(name: str, data: bytes) -> bytes:
    if name == "data/weights/model_weights_config.json":
        return data.replace(b'"use_pickle": false', b'"use_pickle": true', 1)
    return data


class _Added:
    def __init__(self, extra: dict[str, bytes]) -> None:
        self.add = extra

    def __call__(self, name: str, data: bytes) -> bytes:
        return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_pickled_weight, "stores the weight 'linear.weight' as a pickled object"),
        (_Added({"data/constants/opaque_obj_0": b"x"}), "holds 'data/constants/opaque_obj_0'"),
        (_Added({"data/aotinductor/model/model.so": b"x"}), "is an AOTInductor package"),
        (_Added({"models/second.json": b"{}"}), "holds 'models/second.json'"),
        (_Added({"extra/zeros.txt": b"\0" * (64 << 20)}), "looks like a zip bomb"),
    ],
    ids=["pickled-weight", "opaque-object", "aoti", "second-model", "zip-bomb-member"],
)
def test_archive_members_outside_the_plain_layout_are_refused(
    data_dir: Path, linear_pt2: Path, tmp_path: Path, change, message: str
) -> None:
    crafted = torch_models.rewrite(linear_pt2, tmp_path / "odd.pt2", change)
    reject(crafted, "odd.pt2", message, data_dir)


BLOCK_TORCH = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'onnxscript'):
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Block())
from backend.errors import UserError
from backend.models.ingest import ingest_file
try:
    ingest_file(sys.argv[1], 'linear.pt2')
except UserError as exc:
    print('REFUSED', exc)
"""


def test_without_torch_a_pt2_upload_is_refused_with_the_reason(
    data_dir: Path, linear_pt2: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH, str(linear_pt2)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert "REFUSED" in done.stdout, done.stderr[-2000:]
    assert "needs torch, onnxscript (not installed here)" in done.stdout
    assert "requirements-genai.txt" in done.stdout
    assert_nothing_stored(data_dir)


def test_without_a_working_sandbox_a_pt2_upload_is_refused_with_the_reason(
    data_dir: Path, linear_pt2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(tmp_path / "no-bwrap"))
    reject(
        linear_pt2,
        "linear.pt2",
        r"PyTorch \.pt2 uploads are refused here because the bubblewrap sandbox .* is not "
        r"installed; .* \(loading one is only ever done inside that sandbox\)\.",
        data_dir,
    )


# ---- slow: the sandboxed export child ---------------------------------------------------------


def test_encoder_pt2_added_by_the_cli_keeps_dynamic_dims_matches_and_sweeps(
    data_dir: Path, encoder_pt2: Path
) -> None:
    import torch

    added = optiboard("add", str(encoder_pt2))

    assert added.returncode == 0, added.stderr[-2000:]
    assert "added model 1: encoder (pytorch-exported, opset 20" in added.stdout
    assert "Checked against the ExportedProgram with ONNX Runtime" in added.stdout
    assert "Dynamic dimensions: x_dim0 (1..64), x_dim1 (2..256)." in added.stdout
    row = library.get_model(1)
    assert [i["shape"] for i in row.inputs] == [["x_dim0", "x_dim1", 16]]
    converted = next(a for a in library.list_artifacts(1) if a.kind == "converted")
    check = converted.meta["check"]
    assert [r["shapes"] for r in check["runs"]] == [{"x": [2, 8, 16]}, {"x": [3, 9, 16]}]
    assert check["max_abs_diff"] < 1e-4 and check["cosine"] > 0.9999
    assert [(d["name"], d["min"], d["max"]) for d in converted.meta["dims"]] == [
        ("x_dim0", 1, 64),
        ("x_dim1", 2, 256),
    ]
    # a size the check did not use: ONNX Runtime still agrees with the program
    x = torch.randn(5, 21, 16, generator=torch.Generator().manual_seed(7))
    want = torch.export.load(encoder_pt2).module()(x).detach().numpy()
    session = ort.InferenceSession(str(library.onnx_path(1)), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # and it sweeps like an ONNX upload: the sequence is a symbolic dim given on the CLI
    run = optiboard(
        "run", "1", "--precisions", "fp32", "--batch-sizes", "3", "--dim", "x_dim1=12", "--quick"
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "1/1" in run.stdout and "job 1 succeeded" in run.stdout
    assert "onnxruntime/cpu/fp32/b3/" in run.stdout and "x_dim1=12" in run.stdout


def test_an_operator_the_exporter_cannot_handle_is_quoted(data_dir: Path, tmp_path: Path) -> None:
    import torch

    program = torch_models.save_linear_pt2(
        tmp_path / "eigh.pt2", lambda x: torch.linalg.eigh(x @ x.T)[0]
    )
    with pytest.raises(pt2convert.ConversionFailed) as caught:
        ingest_file(program, "eigh.pt2")
    message = str(caught.value)
    assert message.startswith("torch.onnx.export could not convert the program: DispatchError: ")
    assert "No ONNX function found for <OpOverload(op='aten._linalg_eigh'" in message
    assert "\n" not in message
    assert_nothing_stored(data_dir)


def test_a_crafted_pickle_that_slipped_past_the_checks_still_never_runs(
    data_dir: Path, linear_pt2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: with the byte checks switched off, the sandboxed child's weights-only
    loading refuses the pickle (torch's own fallback to weights_only=False included), so the
    print it hides never reaches the conversion log."""
    payload = torch_models.RunsCode(builtins.print, "CRAFTED-PICKLE-RAN")
    crafted = torch_models.with_hostile_sample_inputs(linear_pt2, tmp_path / "c.pt2", payload)
    monkeypatch.setattr(pt2convert, "check_archive_in_child", lambda *args: None)
    with pytest.raises(pt2convert.ConversionFailed) as caught:
        pt2convert.convert_exported_program(crafted, tmp_path / "out.onnx", crafted.name)
    assert str(caught.value).startswith("torch.export.load could not read the program")
    assert "Weights only load failed" in caught.value.log
    assert "CRAFTED-PICKLE-RAN\n" not in caught.value.log  # what the print would have written
    assert not (tmp_path / "out.onnx").exists()
