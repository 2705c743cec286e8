"""The CLI as a user types it, over a real data directory."""

from __future__ import annotations

import contextlib
import getpass
import io
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import onnxruntime
import pytest

from backend import cli, energy
from backend.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
# Verbs that set process-wide state (the worker configures logging on the stderr it starts with),
# which a later test in this process would inherit: always run as a program of their own.
PROCESS_VERBS = {"worker"}


def optiboard(*args: str, process: bool = False) -> subprocess.CompletedProcess:
    """`python -m backend.cli *args` with its output and exit status. Run in this process: the
    same main() the module runs, from the checkout's root with this environment, without a second
    interpreter importing the backend again (about 0.7 CPU-s a call, some 80 calls a run).
    process=True runs the program itself, for the tests of exactly what a newcomer types."""
    if process or args[:1] and args[0] in PROCESS_VERBS:
        return subprocess.run(
            [sys.executable, "-m", "backend.cli", *args],
            cwd=ROOT,
            env=os.environ.copy(),
            capture_output=True,
            text=True,
            timeout=600,
        )
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(list(args))
        except SystemExit as exc:  # argparse's refusals, as the program would exit
            code = exc.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if isinstance(code, str):
                print(code, file=sys.stderr)
    return subprocess.CompletedProcess(["optiboard", *args], status, out.getvalue(), err.getvalue())


def test_add_inspect_run_show_and_export(data_dir: Path, cnn_path: Path, tmp_path: Path) -> None:
    added = optiboard("add", str(cnn_path), "--name", "resnetish")
    assert added.returncode == 0, added.stderr
    assert "added model 1: resnetish (onnx, opset 17" in added.stdout

    inspected = optiboard("inspect", "1")
    assert "input: float32[batch, 3, 32, 32]" in inspected.stdout
    assert "Conv" in inspected.stdout and "original" in inspected.stdout

    run = optiboard(
        "run", "1", "--precisions", "fp32,int8_static", "--batch-sizes", "1,2", "--quick"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4/4" in run.stdout and "job 1 succeeded" in run.stdout
    assert run.stdout.count("onnxruntime/cpu/int8_static/") >= 2
    assert "RSS MB: peak resident memory over session + timed loop." in run.stdout
    ran = (
        f"ran: onnxruntime {onnxruntime.__version__} (default env), Python {sys.version.split()[0]}"
    )
    assert f"{ran} on " in run.stdout and f"(host {platform.node()})" in run.stdout
    cpu_energy = energy.meter_for("cpu").source  # this host's RAPL, or why it is not readable
    assert f"J/sample, idle W: {cpu_energy}" in run.stdout
    # each row's stability verdict beside its status ("ok" alone hid an unstable measurement),
    # and the columns empty in every row left out and named, as on the Compare page
    from backend.queue import jobs

    rows = {row["configuration"]: row for row in table_rows(run.stdout, "configuration")}
    for stored in jobs.stored_results(1):
        verdict = {True: "yes", False: "no", None: "-"}[stored.result.stable]
        assert rows[stored.result.config_key]["stable"] == verdict
    measured = energy.meter_for("cpu").measurable
    assert ("J/sample" in next(iter(rows.values()))) == measured
    assert ("Not shown, empty in every row: J/sample, idle W" in run.stdout) != measured

    shown = optiboard("show", "1", "--log")
    assert "succeeded, 4/4 configurations" in shown.stdout and "claimed by" in shown.stdout

    csv_path, json_path = tmp_path / "r.csv", tmp_path / "r.json"
    assert optiboard("export", "1", "--format", "csv", "-o", str(csv_path)).returncode == 0
    assert optiboard("export", "1", "--format", "json", "-o", str(json_path)).returncode == 0
    lines = csv_path.read_text().splitlines()
    assert len(lines) == 5 and "p50_ms" in lines[0]
    records = json.loads(json_path.read_text())
    assert len(records) == 4 and all(r["samples_ms"] for r in records)
    assert {r["configuration"]["precision"] for r in records} == {"fp32", "int8_static"}
    assert {r["energy"]["source"] for r in records} == {cpu_energy}  # stored with each result
    late = optiboard("cancel", "1")  # said "cancel requested" of a finished job until 2026-12-07
    assert late.returncode == 2
    assert late.stderr == "error: Job 1 had already succeeded; nothing was cancelled.\n"


def test_submit_queues_a_job_for_the_worker(data_dir: Path, mlp_path: Path) -> None:
    assert optiboard("add", str(mlp_path)).returncode == 0
    submitted = optiboard(
        "submit", "1", "--precisions", "fp32,fp16", "--batch-sizes", "1,8", "--providers", "cpu"
    )
    assert "queued job 1 with 4 configurations" in submitted.stdout
    listed = optiboard("jobs")
    assert "queued" in listed.stdout and "0/4" in listed.stdout
    (row,) = table_rows(listed.stdout, "id")  # what it runs, and the clock its time is on
    assert row["kind"] == "sweep" and row["created (UTC)"].startswith("20")
    assert "cancelled" in optiboard("cancel", "1").stdout
    from backend.auth.audit import recent

    log = [(e.actor, e.action, e.target, e.outcome) for e in reversed(recent())]
    who = f"cli:{getpass.getuser()}"
    assert log == [
        (who, "upload", "mlp.onnx", "ok"),
        (who, "submit", "model 1", "ok"),
        (who, "cancel", "job 1", "ok"),
    ]


def test_bad_input_is_one_clear_line_and_exit_code_2(data_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    result = optiboard("add", str(empty))
    assert result.returncode == 2 and result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr
    assert "no models yet" in optiboard("models").stdout
    bad = optiboard("submit", "1")
    assert bad.returncode == 2 and "There is no model 1" in bad.stderr
    from backend.auth.audit import recent

    assert [(e.action, e.outcome) for e in recent()] == [("submit", "failed"), ("upload", "failed")]
    providers = optiboard("providers")
    assert "onnxruntime" in providers.stdout and "cpu" in providers.stdout
    assert providers.stdout.split()[:2] == ["runtime", "provider"]  # docs/runtimes.md's words


def test_adding_a_missing_file_or_a_folder_is_one_sentence(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both ended in a traceback (FileNotFoundError, IsADirectoryError) until 2026-12-07."""
    folder = tmp_path / "hf-model"
    folder.mkdir()
    assert cli.main(["add", str(tmp_path / "missing.onnx")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: There is no file {tmp_path / 'missing.onnx'}; give the path of a model file."
    )
    assert cli.main(["add", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {folder} is a folder; zip its files and add the zip (cd ")
    assert "\n" not in err and "Traceback" not in err
    assert cli.main(["add", "/dev/null"]) == 2  # it exists: "There is no file" was wrong
    assert capsys.readouterr().err.strip() == (
        "error: /dev/null is not a regular file; give the path of a model file."
    )
    assert cli.main(["models"]) == 0 and "no models yet" in capsys.readouterr().out


def test_an_output_file_that_cannot_be_written_is_one_sentence_before_any_work(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`export -o FOLDER` and `compat -o FOLDER` ended in IsADirectoryError, a missing folder in
    FileNotFoundError, after the work (the compatibility matrix built) until 2026-12-07."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    for verb in (["export", "99"], ["compat", "99"]):
        assert cli.main([*verb, "-o", str(tmp_path)]) == 2
        said = capsys.readouterr().err.strip()
        assert (
            said
            == f"error: {tmp_path} is a folder; give a file to write, such as {tmp_path / 'out'}."
        )
        assert cli.main([*verb, "-o", str(blocked / "x.csv")]) == 2  # its folder is a file
        said = capsys.readouterr().err.strip()
        assert said == f"error: {blocked} is a file, not a folder; give another path to write."


def test_counts_the_cli_takes_above_zero_are_refused_by_argparse_at_zero(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """jobs --limit -1 listed jobs, worker --poll-seconds 0 polled without pause and serve
    recommend --top 0 listed none, until 2026-12-07; worker --lease-seconds 0 held leases that
    lapse as they are taken (so another worker may take the same job)."""
    flags = (("jobs", "--limit"), ("worker", "--poll-seconds"), ("worker", "--lease-seconds"))
    for verb, flag in flags:
        with pytest.raises(SystemExit) as ended:
            cli.main([verb, flag, "0"])
        assert ended.value.code == 2
        assert f"argument {flag}: takes a number above 0, not 0" in capsys.readouterr().err
    from backend.serving.view import serve_view

    with pytest.raises(UserError, match="The required rate cannot be negative, not -1 req/s"):
        serve_view(1, 10.0, min_rps=-1)


def test_real_calibration_samples_reach_static_int8(
    data_dir: Path, cnn_path: Path, tmp_path: Path
) -> None:
    import numpy as np

    assert optiboard("add", str(cnn_path)).returncode == 0
    samples = np.random.default_rng(3).standard_normal((6, 3, 32, 32)).astype(np.float32)
    npz = tmp_path / "calib.npz"
    np.savez(npz, input=samples)
    run = optiboard("run", "1", "--precisions", "int8_static", "--calibration", str(npz), "--quick")
    assert run.returncode == 0, run.stdout + run.stderr
    records = json.loads(optiboard("export", "1", "--format", "json").stdout)
    steps = " ".join(records[0]["steps"])
    assert "6 calibration samples" in steps and "random" not in steps

    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, tokens=samples)
    bad = optiboard("submit", "1", "--precisions", "int8_static", "--calibration", str(wrong))
    assert bad.returncode == 2 and "input" in bad.stderr
    listed = optiboard("jobs").stdout
    assert "queued" not in listed and listed.count("succeeded") == 1  # nothing was submitted


def test_run_measures_onnxruntime_and_openvino_side_by_side(
    data_dir: Path, cnn_path: Path, tmp_path: Path
) -> None:
    """One job over two runtimes: each precision on each runtime, or why it cannot run there."""
    assert optiboard("add", str(cnn_path)).returncode == 0
    unknown = optiboard("submit", "1", "--runtimes", "onnxruntime,tflite")
    assert unknown.returncode == 2 and "Unknown runtime 'tflite'" in unknown.stderr
    run = optiboard(
        "run", "1", "--runtimes", "onnxruntime,openvino", "--precisions", "fp32,bf16", "--quick"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    json_path = tmp_path / "r.json"
    assert optiboard("export", "1", "--format", "json", "-o", str(json_path)).returncode == 0
    records = {
        r["config_key"].split("/")[0] + "/" + r["configuration"]["precision"]: r
        for r in json.loads(json_path.read_text())
    }
    assert set(records) == {
        "onnxruntime/fp32",
        "onnxruntime/bf16",
        "openvino/fp32",
        "openvino/bf16",
    }
    assert records["onnxruntime/bf16"]["status"] == "unavailable"
    assert "only through OpenVINO" in records["onnxruntime/bf16"]["error"]
    assert records["openvino/fp32"]["status"] == "ok"
    assert records["openvino/fp32"]["runtime_facts"]["execution_precision"] == "f32"
    assert records["openvino/fp32"]["layer_profile"]
    assert records["openvino/bf16"]["status"] in {"ok", "unavailable"}
    if records["openvino/bf16"]["status"] == "ok":
        assert records["openvino/bf16"]["runtime_facts"]["execution_precision"] == "bf16"

    from backend.reporting import frames
    from backend.reporting.side_by_side import runtimes_side_by_side

    table = runtimes_side_by_side(frames.results_frame(job_ids=[1])).set_index("precision")
    assert list(table.index) == ["FP32", "BF16"]  # one row per precision, runtimes side by side
    assert table.at["FP32", "ONNX Runtime CPU · vs FP32"] == 1.0
    assert table.at["FP32", "OpenVINO CPU · ran as"] == "f32"
    assert table.at["FP32", "OpenVINO CPU · cosine"] > 0.9999
    assert table.at["BF16", "ONNX Runtime CPU · ran as"].startswith("unavailable: ")
    if records["openvino/bf16"]["status"] == "ok":
        # what ran, layer by layer: OpenVINO keeps some layers of a bf16 compile in f32 (on this
        # host 12 of 20), which a bare "bf16" hid
        ran = table.at["BF16", "OpenVINO CPU · ran as"]
        counts = records["openvino/bf16"]["runtime_facts"]["layer_precisions"]
        if len(counts) > 1:
            assert ran.endswith("(compiled for bf16)") and "bf16 " in ran
            assert all(f"{name} {n}" in ran for name, n in counts.items()), (ran, counts)
        else:
            assert ran == "bf16"
        assert table.at["BF16", "OpenVINO CPU · vs FP32"] > 0


def test_presets_are_the_optimize_pages_and_quick_is_an_alias(
    data_dir: Path, mlp_path: Path
) -> None:
    from backend.cli import main
    from backend.queue import jobs
    from backend.specs import MEASURE_PRESETS

    assert main(["add", str(mlp_path)]) == 0
    for args in (["--quick"], ["--preset", "quick"], ["--preset", "thorough"], []):
        assert main(["submit", "1", "--precisions", "fp32", *args]) == 0
    measures = [jobs.spec_of(j).measure for j in reversed(jobs.list_jobs())]
    quick, thorough, standard = (MEASURE_PRESETS[n] for n in ("quick", "thorough", "standard"))
    assert measures == [quick, quick, thorough, standard]
    assert main(["submit", "1", "--preset", "thorough", "--max-seconds", "7"]) == 0
    capped = jobs.spec_of(jobs.list_jobs()[0]).measure
    assert capped.max_seconds == 7 and capped.window_runs == thorough.window_runs


def test_users_cli_makes_the_first_admin_who_can_then_sign_in(data_dir: Path) -> None:
    from backend.auth import accounts
    from backend.auth.audit import recent

    added = subprocess.run(
        [sys.executable, "-m", "backend.cli", "users", "add", "root", "--role", "admin"]
        + ["--password-stdin"],
        cwd=ROOT,
        env=os.environ.copy(),
        input="correct horse battery\n",
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert added.returncode == 0, added.stderr
    assert accounts.sign_in("root", "correct horse battery").role.value == "admin"
    assert "root  admin" in optiboard("users", "list").stdout
    refused = optiboard("users", "remove", "root")
    assert refused.returncode == 2 and "last admin" in refused.stderr
    entries = recent()
    assert {e.actor for e in entries if e.action != "sign_in"} == {f"cli:{getpass.getuser()}"}
    assert [(e.actor, e.outcome) for e in entries if e.action == "sign_in"] == [("root", "ok")]


def test_users_add_and_password_check_the_name_before_asking_and_say_when_input_ends(
    data_dir: Path,
) -> None:
    """With no terminal and nothing piped in, `users add NAME` ended in getpass's EOFError
    traceback, and a bad or taken name was refused only after the password was asked twice,
    until 2026-12-07."""

    def users(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "backend.cli", "users", *args], cwd=ROOT, env=os.environ.copy(),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
        )  # fmt: skip

    bad = users("add", "", "--role", "admin")
    assert bad.returncode == 2 and bad.stderr.startswith("error: '' is not a usable account name")
    assert "Password" not in bad.stdout + bad.stderr
    ended = users("add", "root", "--role", "admin")
    assert ended.returncode == 2 and "Traceback" not in ended.stderr
    assert ended.stderr.endswith(
        "error: No password was typed (the input ended); run it in a terminal, or pipe the "
        "password in with --password-stdin.\n"
    )
    nobody = users("password", "nobody")
    assert nobody.returncode == 2 and "Password" not in nobody.stdout + nobody.stderr
    assert "There is no account named 'nobody'" in nobody.stderr
    assert "no accounts yet" in optiboard("users", "list").stdout


def test_gpu_flags_reach_the_sweep_and_impossible_ones_are_refused(
    data_dir: Path, mlp_path: Path
) -> None:
    assert optiboard("add", str(mlp_path)).returncode == 0
    refused = optiboard("submit", "1", "--providers", "cuda", "--cuda-graph")
    assert refused.returncode == 2 and "device-resident" in refused.stderr
    unfused = optiboard(
        "submit", "1", "--providers", "cuda", "--precisions", "fp16", "--fuse-conv-bias"
    )
    assert unfused.returncode == 2 and "needs prefer_nhwc" in unfused.stderr
    assert "no jobs" in optiboard("jobs").stdout.lower()
    submitted = optiboard(
        "submit", "1", "--providers", "cpu,cuda", "--precisions", "fp16",
        "--timing", "end_to_end,device", "--cuda-graph", "--nhwc", "--find-knee",
        "--knee-max-batch", "4", "--fuse-conv-bias",
    )  # fmt: skip
    # cpu: end to end only, b1/b2/b4; cuda: both timings, b1/b2/b4
    assert "queued job 1 with 9 configurations" in submitted.stdout, submitted.stderr
    from backend.queue.jobs import get_job, spec_of

    spec = spec_of(get_job(1))
    assert spec.find_knee and spec.cuda.prefer_nhwc and spec.cuda.enable_cuda_graph
    assert spec.cuda.fuse_conv_bias
    keys = [c.key for c in spec.configurations()]
    assert "onnxruntime/cuda/fp16/b4/fixed/all/t0/device/nhwc/cudagraph/fusebias" in keys
    assert "onnxruntime/cuda/fp16/b4/fixed/all/t0/nhwc/fusebias" in keys


def table_rows(text: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the printed table whose header starts with `first_header`, by column name
    (columns are cut at the dashed rule's gaps, so a cell may hold spaces)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_header))
    header, rule = lines[start], lines[start + 1]
    spans, at = [], 0
    for dashes in rule.split("  "):
        spans.append((at, at + len(dashes)))
        at += len(dashes) + 2
    names = [header[a:b].strip() for a, b in spans]
    rows = []
    for line in lines[start + 2 :]:
        gaps = [b for _, b in spans[:-1]]  # every cell is padded: a row is as wide as its header
        if len(line) != len(header) or any(line[g : g + 2] != "  " for g in gaps):
            break
        rows.append({n: line[a:b].strip() for n, (a, b) in zip(names, spans, strict=True)})
    return rows


def test_show_says_agreement_apart_from_eval_accuracy_and_compare_prints_the_compare_table(
    data_dir: Path, cnn_path: Path, tmp_path: Path
) -> None:
    """Walkthrough items 2 and 3: 'top-1' was agreement with FP32 read as accuracy; no compare."""
    import numpy as np

    from backend.queue import jobs

    assert optiboard("add", str(cnn_path)).returncode == 0
    rng = np.random.default_rng(5)
    evaluation, calibration = tmp_path / "eval.npz", tmp_path / "calib.npz"
    inputs = rng.standard_normal((16, 3, 32, 32)).astype(np.float32)
    np.savez(evaluation, input=inputs, labels=np.arange(16) % 10)
    np.savez(calibration, input=inputs[:4])
    flags = ["--batch-sizes", "1", "--quick"]
    scored = optiboard(
        "run", "1", "--precisions", "fp32,int8_static", *flags,
        "--calibration", str(calibration), "--evaluation", str(evaluation),
    )  # fmt: skip
    assert scored.returncode == 0, scored.stdout + scored.stderr
    # job 2 priced apart from job 1's default: compare names both prices unless --price is given
    apart = optiboard("run", "1", "--precisions", "fp32", *flags, "--price", "cpu=0.8")
    assert apart.returncode == 0, apart.stderr

    shown = optiboard("show", "1")
    rows = table_rows(shown.stdout, "configuration")
    assert list(rows[0])[-3:] == ["cosine", "top-1 vs FP32", "top-1 on eval set"]
    assert "error" not in rows[0]  # no row failed: the empty column is left out
    accuracy = {
        s.result.configuration.precision.value: s.result.evaluation.top1_accuracy
        for s in jobs.stored_results(1)
    }
    for row in rows:
        precision = row["configuration"].split("/")[2]
        assert row["top-1 on eval set"] == f"{accuracy[precision]:.1%}"
    assert "top-1 vs FP32: share of rows whose top class is FP32's" in shown.stdout
    plain = optiboard("show", "2").stdout  # no evaluation set: no such column
    assert "top-1 on eval set" not in plain and "top-1 vs FP32" in plain
    assert "No price for" not in plain
    unpriced = optiboard("show", "2", "--price", "gpu=1").stdout  # a typo: cpu's costs were "-"
    assert "No price for cpu, so its configurations have no cost: add cpu=DOLLARS" in unpriced
    unpriced = optiboard("compare", "2", "--price", "gpu=1").stdout
    assert "No price for cpu, so its configurations have no cost: add cpu=DOLLARS" in unpriced

    compared = optiboard("compare", "1", "2", "--price", "cpu=1.5")
    assert compared.returncode == 0, compared.stderr
    table = table_rows(compared.stdout, "job")
    assert [(r["job"], r["precision"], r["batch"]) for r in table] == [
        ("1", "fp32", "1"),
        ("1", "int8_static", "1"),
        ("2", "fp32", "1"),
    ]
    p50 = {(r["job"], r["precision"]): float(r["p50 ms"]) for r in table}
    speedups = [r["speedup (p50)"] for r in table]
    # each job's own FP32 is its baseline (the page's default): job 2's FP32 divides by itself
    assert speedups[0] == speedups[2] == "1.00"
    ratio = p50[("1", "fp32")] / p50[("1", "int8_static")]  # within the printed rounding
    assert abs(float(speedups[1]) - ratio) <= 0.02 * ratio + 0.01, (speedups[1], ratio)
    assert all(r["status"] == "ok" and r["stable"] in {"yes", "no"} for r in table)
    # the page's "Speedup firm", beside the speedup: no firm figure from an unstable row
    assert all(r["firm"] in {"yes", "no"} for r in table)
    assert all(r["firm"] == "no" for r in table if r["stable"] == "no")
    assert "firm: the speedup is a firm figure: this row and the baseline row" in compared.stdout
    assert table[2]["top-1 on eval set"] == "-" and table[0]["top-1 on eval set"].endswith("%")
    assert (
        "baseline #1 cnn CPU FP32; #2 cnn CPU FP32, each job's own first measured FP32 series"
        in compared.stdout
    )
    assert "The cheapest configuration is #" in compared.stdout
    assert "$1.5/h for cpu" in compared.stdout  # the --price table, not the jobs' own
    # a note's speed is against its own job's FP32, which two jobs' table may not use
    assert "\nwhy:\n" not in compared.stdout
    if "why (" in compared.stdout:
        assert "why (each against its own job's FP32, not the baseline above):" in compared.stdout
    assert "priced differently" not in compared.stdout
    own = optiboard("compare", "1", "2").stdout  # each job's own prices: said apart
    assert "These jobs were priced differently, so their costs are not like for like: cpu at" in own
    assert "$0.80/h in job 2" in own and "give one with --price to compare them alike" in own
    assert f"ran: onnxruntime {onnxruntime.__version__} (default env)" in compared.stdout
    assert optiboard("compare", "1,2", "2").stdout == own  # commas too; each job once
    bad = optiboard("compare", "1,x")
    assert bad.returncode == 2 and "takes job numbers such as 7 or 7,8, not '1,x'" in bad.stderr

    queued = optiboard("serve", "submit", "1", "--concurrency", "1", "--duration", "0.5")
    assert queued.returncode == 0, queued.stderr  # job 3, a serving study, never run here
    refused = optiboard("compare", "1", "3")
    assert refused.returncode == 2 and refused.stderr == (
        "error: Job 3 is a serving study, not a sweep; compare takes sweeps only, and "
        "`optiboard show 3` prints it.\n"
    )
    mixed = optiboard("export", "1", "3")
    assert mixed.returncode == 2 and mixed.stderr == (
        "error: Job 3 is a serving study and job 1 is not, and their columns differ; export "
        "them separately.\n"
    )
    waiting = optiboard("show", "3")
    assert "0 of 1 load point measured\nNo load point is measured yet" in waiting.stdout
    assert optiboard("show", "1", "--slo", "5").returncode == 2  # a sweep has no p99 bound


def test_inspect_of_a_file_points_to_add_and_a_closed_pipe_ends_quietly(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """`inspect model.onnx` was argparse's "invalid int value"; `optiboard inspect 1 | head -1`
    ended in a BrokenPipeError traceback."""
    assert cli.main(["inspect", str(mlp_path)]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: inspect takes a library model's id, not {str(mlp_path)!r}; add a file first"
    )
    assert cli.main(["add", str(mlp_path)]) == 0
    read, write = os.pipe()
    os.close(read)  # the reader is gone, as `head` is after its line
    with open(write, "w", buffering=1) as closed:
        monkeypatch.setattr(sys, "stdout", closed)
        assert cli.main(["inspect", "1"]) == 141  # a shell's code for SIGPIPE, no traceback


def test_inspect_lists_artifacts_as_a_table_under_a_header(data_dir: Path, tmp_path: Path) -> None:
    """The artifacts were printed in fixed widths without a header: a file name longer than 50
    characters pushed its size and digest out of their columns."""
    from tests import models as model_factory

    stem = "a_rather_long_model_name_exported_from_training_run_2026_v3"
    model_factory.save_with_external_data(model_factory.make_mlp(), tmp_path / "bundle", stem)
    archive = model_factory.zip_folder(tmp_path / "bundle", tmp_path / "ext.zip")
    assert optiboard("add", str(archive)).returncode == 0
    inspected = optiboard("inspect", "1")
    assert inspected.returncode == 0, inspected.stderr
    rows = table_rows(inspected.stdout, "kind")
    assert [(r["kind"], r["file"]) for r in rows] == [
        ("original", "ext.zip"),
        ("converted", f"{stem}.onnx"),
    ]
    from backend.models import library

    stored = library.list_artifacts(1)
    assert [r["bytes"] for r in rows] == [f"{a.size_bytes:,}" for a in stored]
    assert [r["sha256"] for r in rows] == [a.sha256[:12] for a in stored]


def test_show_and_jobs_give_long_errors_in_full_under_the_table_and_costs_in_one_notation(
    data_dir: Path, tmp_path: Path
) -> None:
    """A failed configuration's error was cut at 80 characters ("Load model from /tmp/o"), a
    failed job's padded the jobs table to some 380 characters a line, and $/M read 0.0008441
    beside 1.296e-05 with '-' for configurations that did not run, unexplained."""
    from tests import models as model_factory

    custom = model_factory.save(model_factory.make_custom_op_model(), tmp_path / "custom.onnx")
    wrong = model_factory.save(model_factory.make_fp16_wrong_model(), tmp_path / "wrong.onnx")
    assert optiboard("add", str(custom)).returncode == 0
    assert optiboard("add", str(wrong)).returncode == 0
    failed = optiboard("run", "1", "--precisions", "fp32", "--quick")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    sweep = optiboard(
        "run", "2", "--precisions", "fp32,fp16", "--providers", "cpu,cuda",
        "--batch-sizes", "1,64", "--quick", "--price", "cpu=0.4,cuda=3.5",
    )  # fmt: skip
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr

    listed = optiboard("jobs").stdout
    table = listed.split("errors:\n")[0]
    assert max(len(line) for line in table.splitlines()) < 100  # no column padded to the error
    assert [r["error"] for r in table_rows(listed, "id")] == ["", "[1]"]  # newest first
    said = " ".join(listed.split("errors:\n")[1].split())  # the wrapped note, unwrapped
    assert said.startswith("[1] the only configuration failed: The runtime failed:")
    assert said.endswith("com.acme:MyOp(-1) is not a registered function/op")

    shown = optiboard("show", "1").stdout
    (row,) = table_rows(shown, "configuration")
    assert row["error"] == "[1]"
    note = " ".join(shown.split("errors:\n")[1].split("\nNot shown")[0].split())
    assert note.endswith("is not a registered function/op")
    assert "\nNot shown, empty in every row: p50 ms, p99 ms, samples/s" in shown  # nothing ran
    assert "RSS MB: peak" not in shown  # no note on a column left out

    shown = optiboard("show", "2").stdout
    rows = table_rows(shown, "configuration")
    costs = [r["$/M"] for r in rows if r["$/M"] != "-"]
    assert len(costs) == 2 and all("e" not in c for c in costs), costs  # b1 and b64 on cpu
    assert {r["status"] for r in rows if r["$/M"] == "-"} == {"unavailable", "wrong outputs"}
    assert (
        "$/M is - where there is no cost: 4 configurations did not run (4 unavailable); 2 "
        "computed wrong outputs, which are never priced." in shown
    )
    compared = optiboard("compare", "2").stdout
    assert sorted(r["$/M"] for r in table_rows(compared, "job") if r["$/M"] != "-") == sorted(costs)
    assert "$/M is - where there is no cost: 4 configurations did not run" in compared


def test_adding_the_same_file_twice_names_its_model_and_adds_nothing_unless_copy(
    data_dir: Path, mlp_path: Path
) -> None:
    """`add` of the same file twice made a second model without a word."""
    assert optiboard("add", str(mlp_path)).returncode == 0
    again = optiboard("add", str(mlp_path), "--name", "again")
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.startswith(
        "error: The file 'mlp.onnx' is already model 1 \"mlp\" (the same content, sha256 "
    )
    assert again.stderr.endswith("so nothing was added; use model 1, or ask for a second copy "
        "(--copy, or \"Add even if already in the library\" on the Models page).\n")  # fmt: skip
    assert [r["id"] for r in table_rows(optiboard("models").stdout, "id")] == ["1"]
    copied = optiboard("add", str(mlp_path), "--name", "again", "--copy")
    assert copied.returncode == 0 and copied.stdout.startswith("added model 2: again (onnx")
    # the copy says of which model, though its own name does not (0014's origin)
    listed = {r["id"]: r["origin"] for r in table_rows(optiboard("models").stdout, "id")}
    assert listed == {"1": "upload", "2": "copy of #1"}
    inspected = optiboard("inspect", "2").stdout.splitlines()
    assert inspected[3].startswith("  A second copy of model #1 (mlp): the same file (sha256 ")
    assert optiboard("inspect", "1").stdout.splitlines()[3] == "  Uploaded."


def test_add_and_models_write_a_small_models_size_as_the_pages_do(
    data_dir: Path, mlp_path: Path
) -> None:
    """`add` printed the 3,784-byte test MLP as "0.0 MiB" and `models` as "0.00" under "MiB",
    where the Models page said "3.7 KB"."""
    from pages.components.formatting import fmt_bytes

    size = mlp_path.stat().st_size
    assert fmt_bytes(size) == f"{size / 1024:.1f} KB"  # a few KB: the page's unit, not 0.0
    added = optiboard("add", str(mlp_path))
    assert added.returncode == 0, added.stderr
    assert f"(onnx, opset 17, {fmt_bytes(size)}, 874 parameters)" in added.stdout
    (row,) = table_rows(optiboard("models").stdout, "id")
    assert row["size"] == fmt_bytes(size)


def test_export_html_writes_the_compare_pages_report_of_a_sweep(
    data_dir: Path, mlp_path: Path, tmp_path: Path
) -> None:
    """The Compare page offered an HTML report; `export` had csv and json only."""
    from backend.reporting import htmlreport

    assert optiboard("add", str(mlp_path)).returncode == 0
    run = optiboard(
        "run", "1", "--precisions", "fp32,int8_dynamic", "--batch-sizes", "1", "--quick"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    target = tmp_path / "out" / "report.html"
    written = optiboard("export", "1", "--format", "html", "-o", str(target))
    assert written.returncode == 0, written.stderr
    assert written.stdout == f"wrote 2 results to {target}\n"
    report = target.read_text()
    assert report.startswith("<!DOCTYPE html>") and report.endswith("</html>")
    assert (
        "<h1>Optiboard comparison: job 1</h1>" in report and "baseline: #1 mlp CPU FP32." in report
    )
    assert report.count('class="plotly-graph-div"') == len(htmlreport.CHARTS)  # cpu is priced
    table = report.split("<h2>All configurations</h2>")[1]
    assert "#1 mlp CPU FP32 b1" in table and "#1 mlp CPU INT8 dynamic b1" in table
    # the page's sentences and its Stable / Speedup firm columns (shots/f04: none of them)
    assert "The cheapest configuration is #1 mlp" in report
    assert "<th>Stable</th>" in table and "<th>Speedup firm</th>" in table
    assert optiboard("export", "1", "--format", "html").stdout.startswith("<!DOCTYPE html>")

    assert optiboard("serve", "submit", "1", "--concurrency", "1").returncode == 0  # job 2
    refused = optiboard("export", "2", "--format", "html")
    assert refused.returncode == 2 and refused.stderr == (
        "error: Job 2 is a serving study, not a sweep; --format html is the Compare page's report "
        "of sweeps, so export it as csv or json.\n"
    )
