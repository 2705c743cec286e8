"""`optiboard serve recommend | export | check` over a real data directory."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from backend.cli import main
from backend.records import get_job
from backend.serving.export import parse_config
from backend.serving.server import TritonEnvironment
from storage.repo import results as result_store
from tests.pages.seed import stored_again


def test_export_writes_a_repository_triton_parses_and_check_accepts_it(
    data_dir: Path, mlp_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add", str(mlp_path)]) == 0
    out = tmp_path / "mlp.zip"
    argv = ["serve", "export", "1", "--name", "mlp", "--max-batch-size", "8", "--preferred", "4"]
    assert (
        main([*argv, "--delay-us", "300", "--instances", "2", "--rate", "150", "-o", str(out)]) == 0
    )
    with zipfile.ZipFile(out) as archive:
        config_text = archive.read("mlp/config.pbtxt").decode()
        command = archive.read("mlp/perf_analyzer.txt").decode()
        names = archive.namelist()
    # the line names every file the zip holds (it named two of six)
    assert f"wrote {out}: {', '.join(names)}\n" in capsys.readouterr().out
    assert len(names) > 2 and "mlp/perf_analyzer.txt" in names
    config = parse_config(config_text)
    assert config.max_batch_size == 8 and list(config.dynamic_batching.preferred_batch_size) == [4]
    assert config.instance_group[0].count == 2
    assert "--request-rate-range=150:150:1" in command
    pasted = tmp_path / "config.pbtxt"
    pasted.write_text(config_text)
    assert main(["serve", "check", str(pasted)]) == 0
    pasted.write_text("// pasted from a blog\n" + config_text)
    capsys.readouterr()
    assert main(["serve", "check", str(pasted)]) == 2
    assert "does not parse at line 1, column 1" in capsys.readouterr().err
    assert main(["serve", "check", str(mlp_path)]) == 2  # its bytes were echoed in the sentence
    said = capsys.readouterr().err
    assert said == f"error: {mlp_path} is not text; give the path of a config.pbtxt.\n"


def test_recommend_from_a_measured_sweep_prints_the_evidence_and_the_sentence(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add", str(mlp_path)]) == 0
    assert main(["run", "1", "--precisions", "fp32", "--batch-sizes", "1,8", "--quick"]) == 0
    capsys.readouterr()
    assert main(["serve", "recommend", "1", "--slo", "40", "--top", "3"]) == 0
    printed = capsys.readouterr().out
    # a sweep alone: the caveat comes first, above the rates it bounds, and beside the figure
    assert printed.startswith(
        "Uncalibrated: the rates below are predicted from the sweep's in-process latency alone, "
        "which leaves out the server's per-request cost (for a small model often 10-100x too "
        "high). To count them, run a serving study of this model"
    ), printed
    assert re.search(
        r"meets the p99 bound of 40 ms at [\d,]+ req/s \(predicted from the sweep alone, "
        r"uncalibrated\)",
        printed,
    ), printed
    assert printed.count("leaves out the server's per-request cost") == 1  # said once, above
    assert "In 4 predicted configurations" in printed  # max 8 (as measured), one instance
    assert "meets the p99 bound of 40 ms" in printed and "rate under bound" in printed
    # no serving study of the model: the action that measures the server's costs, printed once
    # (in the first line; the sentence's "Predicted, not measured" said it again)
    assert printed.count("`optiboard serve recommend 1 --slo 40 --confirm 3`") == 1, printed
    assert main(["serve", "recommend", "1", "--slo", "0.01"]) == 3
    assert "none meets the p99 bound of 0.01 ms" in capsys.readouterr().out


def _table(printed: str) -> list[str]:
    """The evidence table's rows, under its dashes, up to the cost sentence."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("-----")) + 1
    return [line for line in lines[start:] if line.startswith(("FP32", "INT8"))]


def test_recommend_lists_the_default_once_marked_as_the_default(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The walkthrough printed 'FP32 on CPU, no batching x1' twice: the ranked row and the
    default appended beside it unlabelled."""
    assert main(["add", str(mlp_path)]) == 0
    assert main(["run", "1", "--precisions", "fp32", "--batch-sizes", "1,8", "--quick"]) == 0
    capsys.readouterr()
    assert main(["serve", "recommend", "1", "--slo", "40"]) == 0
    rows = _table(capsys.readouterr().out)
    assert len(rows) == 4, rows  # max 8 with three delays, and no batching
    default = [row for row in rows if row.startswith("FP32 on CPU, no batching x1")]
    assert len(default) == 1 and default[0].startswith("FP32 on CPU, no batching x1 (default) ")
    # not among the top ones: listed after them, once, still marked
    assert main(["serve", "recommend", "1", "--slo", "40", "--top", "1"]) == 0
    rows = _table(capsys.readouterr().out)
    assert rows[-1].startswith("FP32 on CPU, no batching x1 (default) "), rows
    assert len(rows) == (1 if rows[0] == rows[-1] else 2), rows


def test_recommend_from_unstable_sweep_measurements_says_so_and_marks_the_rows(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same sentence as the Serve page's (phrasing.phrase): a pick resting on an unstable
    measurement is named with its batch size and the remedy; each such row says so."""
    assert main(["add", str(mlp_path)]) == 0
    assert main(["run", "1", "--precisions", "fp32", "--batch-sizes", "1,8", "--quick"]) == 0
    ran = get_job(1)
    keys = {r.config_key for r in result_store.list_results(job_ids=[1])}
    shaky = stored_again(ran, {k for k in keys if "/b8/" in k})  # batch 8 unstable, 1 stable
    capsys.readouterr()
    assert main(["serve", "recommend", str(shaky), "--slo", "40"]) == 0
    printed = capsys.readouterr().out
    for row in _table(printed):  # no batching rests on batch 1 alone, max 8 on 1 and 8
        batched = ", max 8," in row
        assert row.rstrip().endswith("predicted; unstable sweep at batch size 8") == batched, row
    verdict, *details = printed[printed.rindex("\nIn ") :].strip().split("\n- ")  # a line each
    assert details and all("\n" not in d for d in details), printed
    sentence = " ".join([verdict, *details])
    pick = re.search(r"\), (FP32 on CPU, [^,]+(, [^,]+)?, x1) meets the p99 bound", sentence)
    assert pick is not None, sentence
    said = (
        f"{pick.group(1)} rests on the sweep's unstable measurement of FP32 on CPU at batch size 8"
    )
    assert (said in sentence) == (", max 8," in pick.group(1)), sentence
    assert ("re-run the sweep on a quiet host" in sentence) == (", max 8," in pick.group(1))


def test_recommend_with_confirm_measures_the_best_policies_on_the_real_server(
    data_dir: Path,
    mlp_path: Path,
    triton_environment: TritonEnvironment,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["add", str(mlp_path)]) == 0
    assert main(["run", "1", "--precisions", "fp32", "--batch-sizes", "1,8", "--quick"]) == 0
    capsys.readouterr()
    argv = ["serve", "recommend", "1", "--slo", "200", "--confirm", "1", "--duration", "1"]
    code = main([*argv, "--instances", "1", "--top", "3", "--env", "ort-1.31"])
    printed = capsys.readouterr().out
    # the servers that measured costs and confirmed ran the environment's onnxruntime
    assert "confirmed on onnxruntime 1.31.1 (ort-1.31)\n" in printed, printed
    sentence, cost = _verdict_and_cost(printed)
    with capsys.disabled():
        print(printed)  # the evidence, shown with -s or when the test fails
    lead = r"In (\d) measurements? across \1 configurations? \(the best of 7 predicted\), "
    assert re.search(  # the grid's shortest queue delay was probed before predicting
        r"^FP32 on CPU, measured on Triton \(queue-delay probe 500 us\): compute \d",
        printed,
        re.MULTILINE,
    ), printed
    default = r"the default \(no dynamic batching, one instance\)"
    assert "p99 ms  predicted p99 ms" in printed  # beside each other, measured or not
    # cost: the cheapest, ranked among the measured ones
    if code == 0:  # the best predicted policy and the default were both served and measured
        assert cost.startswith("The cheapest configuration that meets p99 <= 200 ms is FP32 on ")
        assert "measured on Triton, $0.4/h for cpu" in cost and "predicted" not in cost
        if "could not be measured: the load generator fell behind" not in sentence:
            assert "; the runner-up, FP32 on CPU, " in cost  # the pick and the default, measured
        # both served: "measured on Triton", or "measured (client saturated)" where the
        # generator could not offer even the lowest rate
        table = printed.strip().rsplit("\n", 1)[0]  # the sentence may say "measured" too
        served = re.findall(r"  measured (on Triton|\(client saturated\))", table)  # sources
        assert len(served) == 2, table
        assert sentence.startswith("In 2 measurements across 2 configurations")
        policy = r"FP32 on CPU, max \d+, delay \d+ us, x1"
        if re.search(default + " is the best", sentence):  # it measured more on this host
            assert re.match(
                lead + default + r" is the best: FP32 on CPU meets the p99 bound of 200 ms at "
                r"[\d,]+ req/s; the best predicted policy, " + policy + r", measured [\d,]+ req/s",
                sentence,
            ), sentence
        else:
            assert re.match(
                lead + policy + r" meets the p99 bound of 200 ms at [\d,]+ req/s, ", sentence
            ), sentence
            pick = re.search(
                r"\), (FP32 on CPU, [^,]+, [^,]+, x1) meets the p99 bound of 200 ms at "
                r"([\d,]+) req/s",
                sentence,
            )
            assert pick is not None, sentence
            row = next(line for line in table.splitlines() if line.startswith(pick.group(1)))
            rate = pick.group(2).replace(",", "")  # the sentence's thousands separators
            assert row.split()[len(pick.group(1).split())] == rate, (row, sentence)
            assert re.search(  # then the gain, where the default missed, or why unmeasured,
                # or why not compared (measured at different shares of their asked rates)
                r"\d+% (more|less) than " + default + "|where " + default + " missed it"
                r"|where " + default + r" could not be measured: the load generator fell "
                r"behind even at [\d,]+ req/s|and " + default + r" met it at [\d,]+ req/s; not "
                r"compared, the pick measured at \d+% of the rate asked and the default "
                r"measured at \d+% of the rate asked",
                sentence,
            ), sentence
    else:  # a host too busy for the generator to offer the rate: said, never hidden
        assert code == 3 and "measured" in printed
        assert re.match(
            lead + r"none meets the p99 bound of 200 ms; the closest is FP32 on CPU, .* "
            r"\(measured(; the load generator could not offer more.*)?\)\.$",
            sentence,
        ), sentence


def test_recommend_refuses_a_negative_confirm_count_before_measuring_anything(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add", str(mlp_path)]) == 0
    assert main(["serve", "recommend", "1", "--slo", "10", "--confirm", "-1"]) == 2
    assert "--confirm takes 0 or more configurations" in capsys.readouterr().err


def test_recommend_takes_an_environment_only_for_the_servers_confirm_starts(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add", str(mlp_path)]) == 0
    assert main(["serve", "recommend", "1", "--slo", "10", "--env", "ort-1.31"]) == 2
    assert "--env picks the onnxruntime of the servers that --confirm starts; add --confirm N" in (
        capsys.readouterr().err
    )


def test_recommend_with_confirm_on_a_missing_job_says_so_and_starts_no_server(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "recommend", "7", "--slo", "10", "--confirm", "1"]) == 2
    assert "There is no job 7" in capsys.readouterr().err


def test_recommend_with_confirm_on_providers_the_sweep_did_not_run_says_so_before_serving(
    data_dir: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add", str(mlp_path)]) == 0
    assert main(["run", "1", "--precisions", "fp32", "--batch-sizes", "1", "--quick"]) == 0
    capsys.readouterr()
    argv = ["serve", "recommend", "1", "--slo", "10", "--confirm", "1"]
    assert main([*argv, "--providers", "cuda"]) == 2  # a CPU sweep: no CUDA file to serve
    assert "Job #1 has no CUDA variant with a model file to serve" in capsys.readouterr().err
    assert main([*argv, "--providers", "cpu,tpu"]) == 2
    assert "--providers takes cpu, cuda (comma separated), not 'cpu,tpu'" in (
        capsys.readouterr().err
    )


def test_a_confirmed_row_prints_the_predicted_p99_beside_the_measured_one() -> None:
    from backend.serving.cli_advice import EVIDENCE_HEADERS, _evidence_rows
    from backend.serving.recommend import recommend
    from tests.backend.serving.test_recommend import FAST, _fallen_back

    rec = recommend([FAST], slo_p99_ms=8.0, confirm=_fallen_back(0.6, 1.0), confirm_top=1)
    rows = {row[0]: dict(zip(EVIDENCE_HEADERS, row, strict=True)) for row in _evidence_rows(rec, 3)}
    assert rec.best is not None and rec.best.measured is not None and rec.best.expected
    best = rows[rec.best.candidate.label]
    assert best["p99 ms"] == f"{rec.best.measured.latency.p99:.2f}"
    assert best["predicted p99 ms"] == f"{rec.best.expected.latency.p99:.2f}"
    assert (
        best["source"] == "measured on Triton (offered 60% of the rate asked: generator fell back)"
    )
    # one rate for the row, as the sentence quotes it: the rate achieved, measured here (not
    # the predicted rate it was asked at, nor the rate offered)
    rate = f"{rec.best.measured.achieved_rps:.0f}"
    said = f"{rec.best.measured.achieved_rps:,.0f}"  # the sentence's thousands separators
    assert best["rate under bound"] == rate and f" at {said} req/s" in rec.sentence
    assert rate != f"{rec.best.rate_rps:.0f}"
    unmeasured = next(e for e in rec.ranked[:3] if e.measured is None)
    predicted = rows[unmeasured.candidate.label]  # never measured: its own prediction
    assert predicted["source"] == "predicted"
    assert predicted["predicted p99 ms"] == predicted["p99 ms"]


def test_recommend_with_confirm_under_a_bound_nothing_is_predicted_to_meet_measures_the_closest(
    data_dir: Path,
    mlp_path: Path,
    triton_environment: TritonEnvironment,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--confirm 1` under a bound no prediction met measured the costs, then confirmed
    nothing: "confirmed on no measured point" and "In 7 predicted configurations (none measured
    on the server yet)". It now measures the closest on the server, and the verdict and the
    cost line both rest on that measurement."""
    assert main(["add", str(mlp_path)]) == 0
    assert main(["run", "1", "--precisions", "fp32", "--batch-sizes", "1,8", "--quick"]) == 0
    capsys.readouterr()
    argv = ["serve", "recommend", "1", "--slo", "0.05", "--confirm", "1", "--duration", "1"]
    assert main([*argv, "--instances", "1"]) == 3  # no server answers within 0.05 ms
    printed = capsys.readouterr().out
    assert "confirmed on onnxruntime " in printed and "no measured point" not in printed
    sentence, cost = _verdict_and_cost(printed)
    assert sentence.startswith(
        "In 1 measurement across 1 configuration (the closest of 7 predicted, none of which was "
        "predicted to meet the bound), none meets the p99 bound of 0.05 ms; the closest is FP32 "
        "on CPU, "
    ), sentence
    assert "(measured" in sentence and "(predicted" not in sentence
    assert cost == (
        "No cheapest configuration: the one configuration measured on Triton does not meet "
        "p99 <= 0.05 ms."
    ), cost


def test_a_sweep_only_prediction_points_to_the_study_of_the_model_it_could_not_use(
    data_dir: Path,
    mlp_path: Path,
    triton_environment: TritonEnvironment,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A sweep alone predicted 40,470 req/s where a serving study of the same model (whose
    costs did not apply) measured 1,643 req/s on Triton, and said only, deep in its sentence,
    to run a serving study. The first line now says the rates are uncalibrated and names the
    study, what it measured and why its costs are not used."""
    from backend.serving.view import study_view
    from storage.repo import workers as worker_store
    from tests.pages.seed import run_queued

    assert main(["add", str(mlp_path)]) == 0
    assert main(["run", "1", "--precisions", "fp32", "--batch-sizes", "1,8", "--quick"]) == 0
    argv = ["serve", "submit", "1", "--concurrency", "4", "--duration", "1", "--slo", "50"]
    assert main(argv) == 0
    run_queued()
    study = get_job(2)
    assert study.state.value == "succeeded", study.error
    served = [p for c in study_view(2).configurations for p in c.measured]
    kept_up = [p.achieved_rps for p in served if not p.generator_saturated]
    # as if another machine had run the study: its costs are not this host's
    for worker in worker_store.list_workers():
        worker_store.register_worker(
            worker.id, "another-host", worker.pid, worker.hardware, worker.providers
        )
    capsys.readouterr()
    assert main(["serve", "recommend", "1", "--slo", "50", "--top", "3"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("Uncalibrated: the rates below are predicted from the sweep's "), first
    measured = (
        f"measured up to {max(kept_up):,.0f} req/s on Triton"
        if kept_up
        else "measured no point the load generator kept up with"
    )
    assert (
        f"Study 2 of this model {measured} (`optiboard show 2`, /serve?study=2), but its server "
        "costs do not apply here: it ran on another-host, this sweep on "
    ) in first, first
    assert first.endswith("`optiboard serve recommend 1 --slo 50 --confirm 3`."), first


def _verdict_and_cost(printed: str) -> tuple[str, str]:
    """The verdict line (what its "- " detail lines under it rest on left out) and the cost
    sentence printed just above it."""
    lines = printed.strip().splitlines()
    at = max(i for i, line in enumerate(lines) if line.startswith("In "))
    return lines[at], lines[at - 1]
