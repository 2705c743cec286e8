"""Newcomer paths through the CLI (issue 21 item 7): the real CLI in a subprocess, real models."""

from __future__ import annotations

from pathlib import Path

from tests.backend.test_cli import optiboard


def test_worker_verb_takes_the_module_flags_and_jobs_prints_sentences(
    data_dir: Path, mlp_path: Path
) -> None:
    assert optiboard("add", str(mlp_path)).returncode == 0
    # tensorrt is not in this CPU build of ONNX Runtime: the job fails with a sentence
    assert (
        optiboard("submit", "1", "--precisions", "fp32", "--providers", "tensorrt").returncode == 0
    )
    worker = optiboard("worker", "--once", "--lease-seconds", "10", "--poll-seconds", "0.1")
    assert worker.returncode == 0, worker.stderr
    assert "job 1 failed" in worker.stderr

    listed = optiboard("jobs")
    assert "all 1 configurations failed; first: onnxruntime provider 'tensorrt'" in listed.stdout
    assert "['" not in listed.stdout and '["' not in listed.stdout
