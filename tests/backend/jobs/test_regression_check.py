"""The regression check for real through the CLI: an A/A check says same, each side measured in
two processes whose medians it names; one check over two models gives each its own verdict from
its own samples; a check stored before several models, or before processes, still reads back;
refusals store nothing. (ONNX Runtime 1.32.0 against 1.31.1 with a planted
regression, and the pages that show it: tests/pages/test_regression_view.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from backend import runtimeenvs as environments
from backend.cli import main
from backend.errors import UserError
from backend.graphview.views import results_for
from backend.jobs.regresscli import report
from backend.jobs.regression import run_pair
from backend.jobs.regressspec import RegressionSpec, split_key, submit_regression
from backend.jobs.regressview import pair_rows, summary_lines, text_report
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.queue.progress import configuration_progress
from backend.reporting import regression as stats
from storage.repo import results as result_store
from tests import models, runtime_envs
from tests.backend.test_cli import optiboard
from tests.pages.seed import open_page, texts

KEY = "onnxruntime/cpu/fp32/b1/fixed/all/t0"


def test_an_a_a_check_says_same(data_dir: Path, mlp_path: Path) -> None:
    """An A/A check never says slower or faster: same where its interval lies within 5% of 1,
    which it does on a quiet host, else unclear with the remedy (a busy host can leave one
    process of a pair slow for its life), never a change."""
    assert optiboard("add", str(mlp_path)).returncode == 0
    run = optiboard("regress", "1", "--env-b", "default", "--no-profile", "--max-seconds", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    row = next(line for line in run.stdout.splitlines() if line.startswith("onnxruntime/"))
    verdict = "same" if " same " in row else "unclear"
    assert f" {verdict} " in row and "default 1.32.0" in row, run.stdout
    assert " slower " not in row and " faster " not in row, row
    if verdict == "unclear":  # says why, and what to do
        assert "measure in more processes (--processes) or on a quieter host" in run.stdout
    report = optiboard("regress", "--report", "1")
    assert report.stdout == run.stdout.split("\n", 1)[1].rsplit("\n\njob 1", 1)[0] + "\n"
    shown = optiboard("show", "1")
    assert shown.returncode == 0, shown.stderr
    assert report.stdout in shown.stdout  # show prints the same report under the results table
    assert "cheapest configuration" not in shown.stdout  # A and B are not rivals to price
    assert "interval of B/A, the median over pairs of median(B_k)/median(A_k)" in run.stdout
    assert report.stdout.startswith(f"model 1 (mlp): {verdict}, B/A ")  # its one model's line

    # each side in 5 processes (the default), one pair after another: the stored samples are
    # both processes' with their counts, and the report names each process's median
    [a, b] = sorted(jobs.stored_results(1), key=lambda r: r.config_key)
    samples = result_store.result_samples([a.id, b.id])
    runs = {}
    for side in (a, b):
        counts = side.result.environment["process_samples"]
        assert len(counts) == 5 and min(counts) >= 6 and sum(counts) == len(samples[side.id])
        runs[side.id] = stats.by_process(samples[side.id], counts)
    stored_iv = b.result.environment["regression"]["interval"]
    medians = [[float(np.median(p)) for p in runs[side.id]] for side in (a, b)]
    assert stored_iv["process_medians_a_ms"] == pytest.approx(medians[0])
    assert stored_iv["process_medians_b_ms"] == pytest.approx(medians[1])
    assert stored_iv["median_a_ms"] == pytest.approx(np.median(medians[0]))
    said = re.compile(
        r"A in 5 processes: ((?:[\d.e-]+, ){4}[\d.e-]+) ms \(\d+\.\d% apart\); "
        r"B in 5 processes: ((?:[\d.e-]+, ){4}[\d.e-]+) ms \(\d+\.\d% apart\)"
    )
    shown = said.search(run.stdout)
    assert shown, run.stdout
    said_medians = [float(v) for group in shown.groups() for v in group.split(", ")]
    assert said_medians == pytest.approx(medians[0] + medians[1], rel=1e-3), run.stdout
    assert "5 processes a side: each resample draws A B pairs of processes" in run.stdout
    assert said.search(b.result.environment["regression"]["line"])  # the logged line too
    assert "(B/A " in b.result.environment["regression"]["line"]
    assert "the median of 5 pairs' ratios" in b.result.environment["regression"]["line"]
    assert "each in 5 processes one after another" in b.result.environment["regression"]["timing"]

    # a one-model check keeps the keys it always had, so one stored before several models
    # (its spec without 'models') reads back the same: its job's model, the same report
    stored = jobs.stored_results(1)
    assert sorted(r.config_key for r in stored) == [f"{side}:default:{KEY}" for side in "ab"]
    before = {k: v for k, v in jobs.get_job(1).spec.items() if k != "models"}
    old = RegressionSpec.from_dict(before)
    assert old.models == () and old.model_ids(1) == (1,)
    assert text_report(old, pair_rows(old, stored, 1), 1) + "\n" == report.stdout

    # one stored before processes (no 'processes' in its spec, no counts with its samples) was
    # measured in one process a side, and reads so: the per-call interval over all its samples
    older = RegressionSpec.from_dict({k: v for k, v in before.items() if k != "processes"})
    assert older.processes == 1
    for side in stored:
        side.result.environment.pop("process_samples")
    [row] = pair_rows(older, stored, 1)
    assert row.interval == stats.bootstrap_ratio(samples[a.id], samples[b.id])
    # all of one side's samples pooled as one process: a busy host can make that unclear (CI run
    # 57: [1.001, 1.0..]), whose reason then follows the clause
    clause = "; one process a side: the interval cannot see an offset between processes"
    assert row.line.endswith((clause, f"{clause}; {stats.unclear_said()}"))


def test_a_time_cap_too_short_for_samples_says_so_in_one_sentence_and_gives_no_verdict(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-seconds 0.001: A's first window runs into the deadline, B's starts after it and
    times one call; that only round is kept, and with one sample B gets no verdict, not the
    'slower' (B/A 4 to 14) an A/A check used to print from it."""
    assert main(["add", str(mlp_path)]) == 0
    capsys.readouterr()
    args = ["--env-b", "default", "--no-profile", "--max-seconds", "0.001"]
    assert main(["regress", "1", *args]) == 0
    printed = capsys.readouterr().out
    sentence = re.compile(
        r"too few samples to judge: (\d+) from A and 1 from B in the fewest of their 5 processes, "
        r"and a 95% interval of a median needs at least 6 in each process; measure longer \(a "
        r"larger time cap, --max-seconds\)"
    )
    summary = printed.splitlines()[1]
    assert summary.startswith("model 1 (mlp): ") and sentence.fullmatch(summary[15:]), printed
    row = next(line for line in printed.splitlines() if line.startswith("onnxruntime/"))
    assert " too few samples " in row and " same " not in row and " slower " not in row, row
    assert (
        "each side at least 6 samples in each process and 2 processes (fewer: too few " in printed
    )

    [a, b] = sorted(jobs.stored_results(1), key=lambda r: r.config_key)
    samples = result_store.result_samples([a.id, b.id])
    assert b.result.environment["process_samples"] == [1] * 5  # one call in each process
    assert len(samples[b.id]) == 5 and len(samples[a.id]) >= 5
    stored = b.result.environment["regression"]
    assert stored["verdict"] == stats.TOO_FEW
    assert stored["line"].startswith("default against default: too few samples to judge: ")
    logged = [e.message for e in jobs.job_events(1)]
    assert summary in logged and stored["line"] in logged, logged  # the job's log says it too

    at = open_page("compare", view="regression", jobs=1)
    assert not at.exception, at.exception
    assert at.dataframe[0].value["verdict"].tolist() == ["⏳ too few samples"]
    assert at.dataframe[0].value["interval"].tolist() == [""]  # no interval at 95% exists
    shown = texts(at).replace("\\", "")  # the page escapes Markdown
    assert summary in shown and f"⏳ {stored['line']}" in shown, shown
    assert not any(said in shown for said in ("is the same as", " is faster", " is slower", "🟰"))


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
    with pytest.raises(UserError, match="^Unknown runtime 'tvm'; choose from onnxruntime, "):
        RegressionSpec(env_b="default", runtime="tvm")
    for processes in (0, 11):
        with pytest.raises(
            UserError, match=f"^Processes must be between 1 and 10, not {processes}"
        ):
            RegressionSpec(env_b="default", processes=processes)
    # the rounds and the time cap are shared out between the processes
    three = RegressionSpec(env_b="default", processes=3, min_rounds=10)
    assert three.process_rounds() == 4
    assert three.process_measure().max_seconds == pytest.approx(three.measure.max_seconds / 3)
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


def test_openvino_versions_are_checked_like_onnx_runtimes(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenVINO 2026.4.1 (the project's) against 2026.3.1 (ov-2026.3): each side's child loads
    its own version, from its own folder, and the row names both."""
    runtime_envs.set_up("ov-2026.3")
    cnn = models.save(models.make_cnn(channels=8, blocks=1, image=16), tmp_path / "cnn.onnx")
    assert main(["add", str(cnn)]) == 0
    args = ["--env-b", "ov-2026.3", "--runtime", "openvino", "--rounds", "2", "--max-seconds", "1"]
    capsys.readouterr()
    assert main(["regress", "1", *args, "--no-profile"]) == 0
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("openvino/cpu/fp32/b1"))
    assert "default 2026.4.1" in row and "ov-2026.3 2026.3.1" in row, printed
    loaded = [line for line in printed.splitlines() if line.startswith(("A (", "B ("))]
    assert len(loaded) == 2, printed
    assert loaded[0].startswith("A (default): openvino 2026.4.1 from /")
    assert "/.venv/lib/" in loaded[0] and loaded[0].endswith("/site-packages/openvino")
    assert loaded[1].startswith("B (ov-2026.3): openvino 2026.3.1 from /")
    assert "/.runtime-envs/ov-2026.3/lib/" in loaded[1]
    for side in jobs.stored_results(1):
        facts = side.result.environment
        version, folder = (
            ("2026.4.1", ".venv")
            if side.config_key.startswith("a:")
            else ("2026.3.1", ".runtime-envs/ov-2026.3")
        )
        assert facts["backend"] == "openvino" and facts["backend_version"] == version
        assert f"/{folder}/lib/" in facts["runtime_file"], facts["runtime_file"]


def test_one_check_over_two_models_gives_each_its_verdict_from_its_own_samples(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime_envs.set_up("ort-1.31")
    mlp = models.save(models.make_mlp(), tmp_path / "mlp.onnx")
    cnn = models.save(models.make_cnn(channels=8, blocks=1, image=16), tmp_path / "cnn.onnx")
    assert main(["add", str(mlp)]) == 0 and main(["add", str(cnn)]) == 0
    args = ["--env-b", "ort-1.31", "--rounds", "3", "--max-seconds", "1"]
    capsys.readouterr()
    assert main(["regress", "1,2", *args]) == 0  # in this process: no interpreter to start
    printed = capsys.readouterr().out
    assert "1 configuration on each of 2 models" in printed

    job = jobs.get_job(1)
    spec = RegressionSpec.from_dict(job.spec)
    assert spec.models == (1, 2) and job.progress_total == 4
    stored = jobs.stored_results(1)
    by_model: dict[int, dict[str, list[list[float]]]] = {}
    samples = result_store.result_samples([s.id for s in stored])
    for side in stored:
        key = split_key(side.config_key)
        assert key is not None and key.model == side.result.environment["model_id"]
        assert side.result.environment["backend_version"] == (
            "1.32.0" if key.side == "a" else "1.31.1"
        )
        counts = side.result.environment["process_samples"]
        by_model.setdefault(key.model, {})[key.side] = stats.by_process(samples[side.id], counts)
    assert sorted(by_model) == [1, 2]

    rows = pair_rows(spec, stored, job.model_id)
    assert [r.model for r in rows] == ["model 1 (mlp)", "model 2 (cnn)"]
    for r in rows:  # each row's interval and verdict from its own model's two sides
        own = stats.process_ratio(
            *(by_model[r.model_id][side] for side in "ab"), asked=spec.processes
        )
        assert r.interval == own and r.verdict == stats.verdict(own)
        assert r.version_b == "1.31.1" and r.cosine is not None and r.cosine > 0.9999
    assert rows[1].interval.median_a_ms != rows[0].interval.median_a_ms  # type: ignore[union-attr]

    lines = summary_lines(spec, rows, job.model_id)
    for line, r in zip(lines, rows, strict=False):  # a loaded host may leave a side too few
        said = stats.too_few_sentence(r.interval) if r.verdict == stats.TOO_FEW else None
        assert (
            line == f"{r.model}: {said}"
            if said
            else line.startswith(f"{r.model}: {r.verdict}, B/A ")
        )
    if {r.verdict for r in rows} == {"same"}:
        assert lines[2] == "the same on all 2 models"
    else:
        assert " of 2 models: " in lines[2], lines
    logged = [e.message for e in jobs.job_events(1)]
    assert all(line in logged for line in lines), logged  # the job's summary, in its log
    shown = report(1)
    assert shown.startswith("\n".join(lines) + "\n\n") and shown in printed
    labels = [p.label for p in configuration_progress(job)[1]]
    assert labels[0] == "model 1 A default: CPU FP32 b1" and len(labels) == 4

    # the graph's overlays of model 1 take its own sides only, not model 2's (same job)
    assert {s.result.environment["model_id"] for s in results_for(1, "time")} == {1}

    at = open_page("compare", view="regression", jobs=1)
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert table["model"].tolist() == ["model 1 (mlp)", "model 2 (cnn)"]
    assert table["B"].tolist() == ["ort-1.31 1.31.1"] * 2


def test_bad_model_lists_get_one_sentence_and_queue_nothing(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add", str(mlp_path)]) == 0
    capsys.readouterr()
    said = {
        "1,7": "There is no model 7; list models to see which exist.",
        "1,1": "Model 1 is named twice; name each model once.",
        "1,x": "MODEL takes numbers separated by commas, not '1,x'.",
        ",": "Name the model to check: optiboard regress MODEL --env-b NAME.",
    }
    for models_given, sentence in said.items():
        assert main(["regress", models_given, "--env-b", "default", "--submit"]) == 2
        assert capsys.readouterr().err == f"error: {sentence}\n", models_given
    with pytest.raises(UserError, match=r"^B's own model \(--model-b\) pairs one model with"):
        submit_regression([1, 2], RegressionSpec(env_b="default", model_b=1))
    assert jobs.list_jobs() == []
    assert main(["regress", "1", "--env-b", "default", "--submit"]) == 0  # one model, as always
    assert RegressionSpec.from_dict(jobs.get_job(1).spec).models == (1,)


def test_a_negative_seed_is_one_sentence_and_a_value_given_twice_is_checked_once(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A negative seed queued a job that failed in the worker with numpy's ValueError until
    2026-12-07."""
    assert main(["add", str(mlp_path)]) == 0
    capsys.readouterr()
    assert main(["regress", "1", "--env-b", "default", "--seed", "-1", "--submit"]) == 2
    assert capsys.readouterr().err == "error: The seed must be 0 or more, not -1.\n"
    assert jobs.list_jobs() == []
    spec = RegressionSpec(env_b="default", precisions=("fp32", "fp32"), batch_sizes=(1, 4, 1))
    assert (spec.precisions, spec.batch_sizes) == (("fp32",), (1, 4))
