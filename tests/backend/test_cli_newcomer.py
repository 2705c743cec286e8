"""Newcomer paths through the CLI (issue 21 item 7): the real CLI in a subprocess, real models."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from backend.errors import UserError
from backend.queue import jobs
from backend.specs import SweepSpec
from tests import models as model_factory
from tests.backend import test_cli


def optiboard(*args: str) -> subprocess.CompletedProcess:
    """The program itself, as a newcomer types it."""
    return test_cli.optiboard(*args, process=True)


def test_worker_verb_takes_the_module_flags_and_jobs_prints_sentences(
    data_dir: Path, mlp_path: Path
) -> None:
    assert optiboard("add", str(mlp_path)).returncode == 0
    # tensorrt is not in this CPU build of ONNX Runtime: the job fails with a sentence
    submit = ["--precisions", "fp32", "--batch-sizes", "1,2", "--providers", "tensorrt"]
    assert optiboard("submit", "1", *submit).returncode == 0
    worker = optiboard("worker", "--once", "--lease-seconds", "10", "--poll-seconds", "0.1")
    assert worker.returncode == 0, worker.stderr
    assert "job 1 failed" in worker.stderr

    listed = optiboard("jobs")
    assert "all 2 configurations failed; first: onnxruntime provider 'tensorrt'" in listed.stdout
    assert "['" not in listed.stdout and '["' not in listed.stdout


def _sequence_model(path: Path) -> Path:
    """x + 1 over [N, sequence]: docs/cli.md's `--dim seq=128` does not name its dimension."""
    model = model_factory.make_symbolic_dim_model()
    for value in (*model.graph.input, *model.graph.output):
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param == "seq":
                dim.dim_param = "sequence"
    return model_factory.save(model, path)


def test_a_dim_name_the_model_lacks_is_refused_at_submit_naming_its_real_ones(
    data_dir: Path, tmp_path: Path
) -> None:
    assert optiboard("add", str(_sequence_model(tmp_path / "seqmodel.onnx"))).returncode == 0
    refused = optiboard("submit", "1", "--precisions", "fp32", "--dim", "seq=128")
    assert refused.returncode == 2
    assert refused.stderr == (
        "error: The model has no symbolic dimension 'seq'; its dimensions are: N, sequence.\n"
    )
    assert "no jobs yet" in optiboard("jobs").stdout  # nothing was queued

    # the Optimize form's backend path (backend.queue.jobs.submit_sweep) refuses it the same way
    with pytest.raises(UserError, match="its dimensions are: N, sequence"):
        jobs.submit_sweep(1, SweepSpec(symbolic_dims=(("seq", 128),)))
    accepted = optiboard("submit", "1", "--precisions", "fp32", "--dim", "sequence=128")
    assert accepted.returncode == 0, accepted.stderr


def _nan_calibration(path: Path) -> Path:
    """32 samples of the MLP's input `x` [N, 16], 40 of its 512 values NaN and 2 infinite."""
    x = np.random.default_rng(0).normal(size=(32, 16)).astype(np.float32)
    x.ravel()[:40] = np.nan
    x.ravel()[40:42] = np.inf
    np.savez(path, x=x)
    return path


def test_nan_calibration_data_is_refused_at_submit_and_upload_naming_input_and_count(
    data_dir: Path, mlp_path: Path, tmp_path: Path
) -> None:
    from backend.queue import uploads

    assert optiboard("add", str(mlp_path)).returncode == 0
    npz = _nan_calibration(tmp_path / "calib.npz")
    said = "Input 'x' in calib.npz holds 42 NaN or infinite values (of 512); replace them with"
    refused = optiboard("submit", "1", "--precisions", "int8_static", "--calibration", str(npz))
    assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    assert "no jobs yet" in optiboard("jobs").stdout

    with pytest.raises(UserError, match=re.escape(said)):  # the Optimize page's upload
        uploads.store_calibration_upload(1, npz.read_bytes(), "calib.npz")


def test_compat_verb_prints_the_matrix_as_table_csv_and_json(
    data_dir: Path, tmp_path: Path
) -> None:
    custom = model_factory.make_custom_op_model(domain="com.acme", op_type="MyOp")
    assert (
        optiboard("add", str(model_factory.save(custom, tmp_path / "custom.onnx"))).returncode == 0
    )

    shown = optiboard("compat", "1")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:3] == ["backend", "runs", "unsupported"]
    cpu = next(line for line in lines if line.startswith("ONNX Runtime CPU "))
    assert "unsupported" in shown.stdout and "MyOp" in shown.stdout and "com.acme" in shown.stdout
    assert cpu.split()[3].endswith("%")  # "NN% of N" nodes it runs

    out = tmp_path / "compat.csv"
    assert optiboard("compat", "1", "--format", "csv", "-o", str(out)).returncode == 0
    header, *rows = out.read_text().splitlines()
    assert header.startswith("node,index,op_type,domain") and any("MyOp" in r for r in rows)

    as_json = optiboard("compat", "1", "--format", "json")
    document = json.loads(as_json.stdout)
    assert {s["label"] for s in document["summary"]} >= {"ONNX Runtime CPU", "OpenVINO"}

    missing = optiboard("compat", "7")
    assert missing.returncode == 2 and missing.stderr.startswith("error: There is no model 7")
