"""`optiboard serve load|curve` as users type it, over the real library and a real server."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import pytest

from backend.cli import main
from backend.energy import meter_for
from backend.models.ingest import ingest_file
from backend.serving.server import TritonEnvironment
from backend.serving.types import LoadPoint, Scenario


def test_serve_load_prints_one_row_per_concurrency(
    data_dir: Path,
    mlp_path: Path,
    triton_environment: TritonEnvironment,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    argv = ["serve", "load", str(model.id), "--delay-us", "3000", "--max-batch-size", "8"]
    argv += ["--preferred", "4", "--instances", "2"]
    assert main([*argv, "--concurrency", "1,4", "--duration", "0.6", "--preset", "quick"]) == 0
    out = capsys.readouterr().out
    assert "policy: max 8, delay 3000 us, preferred 4, x2" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("concurrency")]
    assert [row[1] for row in rows] == ["1", "4"]
    cpu_energy = meter_for("cpu").source  # this host's RAPL, or why it cannot be read
    assert f"J/request, idle W: {cpu_energy}" in out
    assert main([*argv, "--concurrency", "2", "--duration", "0.4", "--json"]) == 0
    point = LoadPoint.from_dict(json.loads(capsys.readouterr().out.splitlines()[0]))
    assert point.scenario is Scenario.CONCURRENCY and point.spec.concurrency == 2
    assert point.energy is not None and point.energy.source == cpu_energy  # kept with the point
    assert point.energy.per == "request"
    assert point.policy.max_queue_delay_us == 3000 and point.latency.count > 0
    assert point.policy.instance_count == 2 and point.server_metrics["ort_intra_op_threads"] >= 1


def test_serve_load_without_a_rate_or_with_an_unknown_variant_says_what_to_do(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    assert main(["serve", "load", str(model.id), "--scenario", "server"]) == 2
    assert "needs --rate" in capsys.readouterr().err
    assert main(["serve", "load", str(model.id), "--variant", "nope.onnx"]) == 2
    assert "no optimized variant matching 'nope.onnx'" in capsys.readouterr().err
    for verb in ("load", "submit"):  # numpy's ValueError in the run, a failed job, before
        assert main(["serve", verb, str(model.id), "--seed", "-1"]) == 2
        assert capsys.readouterr().err == "error: The seed must be 0 or more, not -1.\n"
    threads = "error: Thread count cannot be negative; 0 lets the runtime choose.\n"
    refused = {  # each started Triton (or queued a study) with it until 2026-12-07
        ("load", "--threads", "-1"): threads,
        ("submit", "--threads", "-1"): threads,
        ("curve", "--threads", "-1"): threads,
        ("load", "--scenario", "offline", "--requests", "0"): (
            "error: An offline burst needs at least 1 request, not 0.\n"
        ),
    }
    for (verb, *flags), said in refused.items():
        assert main(["serve", verb, str(model.id), *flags]) == 2
        assert capsys.readouterr().err == said, (verb, flags)
    from backend.queue import jobs

    assert jobs.list_jobs() == []


def test_serve_submit_queues_one_study_with_a_policy_per_delay_and_instance_count(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from backend.queue import jobs
    from backend.serving.study import ServingStudy

    model = ingest_file(mlp_path, "mlp.onnx")
    argv = ["serve", "submit", str(model.id), "--delay-us", "0,2000", "--instances", "1,2"]
    assert main([*argv, "--concurrency", "1,8", "--slo", "25"]) == 0
    assert "queued job 1: 8 load points over 4 server configurations" in capsys.readouterr().out
    job = jobs.get_job(1)
    study = ServingStudy.from_dict(job.spec)
    assert [(p.max_queue_delay_us, p.instance_count) for p in study.policies] == [
        (0, 1),
        (0, 2),
        (2000, 1),
        (2000, 2),
    ]
    assert [ld.concurrency for ld in study.loads] == [1, 8] and study.slo_p99_ms == 25
    assert study.measure == "quick" and job.progress_total == 8
    from storage.repo.jobs import list_events

    assert [e.message for e in list_events(1)] == ["queued 8 load points"]

    assert main(["serve", "submit", str(model.id), "--variant", "nope.onnx"]) == 2
    assert "no variant matching 'nope.onnx'" in capsys.readouterr().err
    assert main([*argv, "--samples", "32", "--max-batch-size", "8"]) == 2
    assert "Requests of 32 samples exceed the maximum batch size 8" in capsys.readouterr().err
    assert len(jobs.list_jobs()) == 1  # refused studies queue nothing
    from backend.auth.audit import recent

    log = [(e.actor, e.action, e.target, e.outcome) for e in reversed(recent())]
    who = f"cli:{getpass.getuser()}"  # as a sweep's `submit`; the refusals recorded as failed
    assert log == [
        (who, "submit", f"model {model.id}", "ok"),
        (who, "submit", f"model {model.id}", "failed"),
        (who, "submit", f"model {model.id}", "failed"),
    ]
    assert "Requests of 32 samples" in (recent()[0].error or "")
    assert recent()[0].detail == {"kind": "serving"}


def test_a_study_carries_its_runtime_environment_and_a_missing_one_queues_nothing(
    data_dir: Path,
    mlp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from backend import runtimeenvs
    from backend.queue import jobs
    from backend.serving.study import ServingStudy

    model = ingest_file(mlp_path, "mlp.onnx")
    missing = runtimeenvs.RuntimeEnv("ort-9", tmp_path / "ort-9.txt", tmp_path / "nothing")
    monkeypatch.setitem(runtimeenvs.ENVIRONMENTS, "ort-9", missing)
    sentence = (
        "Runtime environment 'ort-9' is not set up; run scripts/setup-runtime-env ort-9 on the "
        "worker's host."
    )
    for verb in ("submit", "load", "curve"):  # refused before a server starts or a job is stored
        assert main(["serve", verb, str(model.id), "--env", "ort-9"]) == 2
        assert capsys.readouterr().err.strip().endswith(sentence)
        assert main(["serve", verb, str(model.id), "--env", "ort-0.1"]) == 2
        assert "There is no runtime environment 'ort-0.1'; choose" in capsys.readouterr().err
    pins = tmp_path / "ov-x.txt"  # set up, but with no onnxruntime for the Python backend
    pins.write_text("openvino==2025.1.0\n")
    (tmp_path / "ov-x" / "bin").mkdir(parents=True)
    for name, text in (("bin/python", ""), (".installed", "x\n"), ("pins.txt", pins.read_text())):
        (tmp_path / "ov-x" / name).write_text(text)
    openvino = runtimeenvs.RuntimeEnv("ov-x", pins, tmp_path / "ov-x")
    monkeypatch.setitem(runtimeenvs.ENVIRONMENTS, "ov-x", openvino)
    assert main(["serve", "submit", str(model.id), "--env", "ov-x"]) == 2
    assert "Runtime environment 'ov-x' pins no onnxruntime, which is all Triton" in (
        capsys.readouterr().err
    )
    assert jobs.list_jobs() == []
    # ort-1.31 is set up by scripts/test
    assert main(["serve", "submit", str(model.id), "--env", "ort-1.31"]) == 0
    job = jobs.list_jobs()[0]
    assert ServingStudy.from_dict(job.spec).runtime_env == job.spec["runtime_env"] == "ort-1.31"
    capsys.readouterr()
    assert main(["show", str(job.id)]) == 0
    assert "runtime environment ort-1.31: no load point stored yet" in capsys.readouterr().out
