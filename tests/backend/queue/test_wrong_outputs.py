"""A configuration whose outputs are wrong (NaN, or a cosine against FP32 under the sweep's bound)
is stored as "wrong outputs", never "ok": no speedup, no Pareto point, no recommendation, no knee,
and its why line says the outputs are wrong. Real worker, real ONNX Runtime, real SQLite.

The model (tests/models.make_fp16_wrong_model) is exact in FP32; its FP16 variant clamps two
constants to float16's range, so FP16 really computes 0/0 = NaN (or all zeros) on this machine.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from backend.hardware import has_vnni
from backend.jobs.knee import knee_summary, skip_reason
from backend.queue import jobs, progress
from backend.reporting import charts, frames
from backend.reporting.metrics import REGISTRY, pareto_front
from backend.reporting.text import results_table, why_lines
from backend.serving.view import variants_from_results
from backend.specs import Int8Matmul, OrtOptions, Precision, SweepSpec
from storage.states import ResultStatus
from tests import models as model_factory
from tests.backend.test_cli import optiboard
from tests.pages.seed import add_model, run_sweep

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def nan_path(tmp_path: Path) -> Path:
    return model_factory.save(model_factory.make_fp16_wrong_model(), tmp_path / "nan.onnx")


def test_nan_outputs_are_stored_wrong_and_kept_out_of_every_ranking(
    data_dir: Path, nan_path: Path
) -> None:
    model = add_model(nan_path, "fp16-nan")
    spec = SweepSpec(precisions=(Precision.FP32, Precision.FP16), batch_sizes=(1, 2))
    job = run_sweep(model.id, spec)
    stored = jobs.stored_results(job.id)
    by_precision = {p: [r for r in stored if r.configuration.precision == p] for p in Precision}
    assert [r.status for r in by_precision[Precision.FP32]] == [ResultStatus.OK] * 2
    assert [r.status for r in by_precision[Precision.FP16]] == [ResultStatus.WRONG_OUTPUTS] * 2
    assert job.state.value == "succeeded"  # FP32 ran fine
    for wrong in by_precision[Precision.FP16]:
        result = wrong.result
        values = 8 * wrong.configuration.batch_size * result.accuracy.samples
        assert result.accuracy.nan_values == values  # every value really is NaN
        samples = result.accuracy.samples
        said = "1 accuracy sample" if samples == 1 else f"{samples} accuracy samples"
        assert result.error == (
            f"Outputs are wrong: {values} NaN values of {values} where FP32 gives finite numbers "
            f"({said}); these timings are not compared or ranked."
        )
        assert result.notes[0] == result.error  # the why line says so, first
        assert not any("precision" in note for note in result.notes)  # not "FP16 lost precision"
        assert result.latency is not None  # it was timed; the timing is just not a result

    frame = frames.results_frame(job_ids=[job.id])
    fp32 = next(s for s in frame["series"] if "FP32" in s)
    view = frames.add_accuracy_loss(frames.add_speedups(frame, fp32), "cosine_distance")
    pareto = pareto_front(
        REGISTRY["speedup"], view["speedup"], REGISTRY["accuracy_loss"], view["accuracy_loss"]
    )
    fp16 = (view["precision"] == "fp16").to_numpy()
    assert np.isnan(view.loc[fp16, "speedup"]).all()
    assert np.isnan(view.loc[fp16, "throughput_ratio"]).all()
    assert not pareto[fp16].any() and pareto[~fp16].any()
    for figure in (charts.throughput_vs_batch(view), charts.latency_vs_batch(view)):
        assert all("FP16" not in (trace.name or "") for trace in figure.data)
    scatter = charts.accuracy_vs_speedup(view.assign(pareto=pareto), "1 - cosine")
    assert all("FP16" not in (trace.name or "") for trace in scatter.data)
    assert {v.precision for v in variants_from_results(frame, 0.3)} == {"fp32"}

    results = [r.result for r in stored]
    table = results_table(results)
    statuses = [line.split()[1:3] for line in table.splitlines() if line.startswith(("onnx",))]
    assert statuses.count(["wrong", "outputs"]) == 2  # the two FP16 rows, under that status
    assert "2 computed wrong outputs, which are never priced" in table  # why their $/M is "-"
    assert sum("Outputs are wrong" in line for line in why_lines(results)) == 2


def test_a_knee_search_stops_at_wrong_outputs_and_never_names_them_the_knee(
    data_dir: Path, nan_path: Path
) -> None:
    model = add_model(nan_path, "fp16-nan")
    spec = SweepSpec(precisions=(Precision.FP16,), find_knee=True, knee_max_batch=4)
    job = run_sweep(model.id, spec)
    stored = jobs.stored_results(job.id)
    assert [r.configuration.batch_size for r in stored] == [1]  # 2 and 4 were not run
    assert skip_reason(spec, spec.configurations()[1], stored) == "batch 1 computed wrong outputs"
    assert knee_summary(spec, stored) == [
        "CPU FP16: no knee: no batch ran; the search ended because batch 1 computed wrong outputs"
    ]


def test_batches_a_knee_search_left_out_say_why_and_the_succeeded_job_reads_done(
    data_dir: Path, nan_path: Path
) -> None:
    model = add_model(nan_path, "fp16-nan")
    spec = SweepSpec(precisions=(Precision.FP32, Precision.FP16), find_knee=True, knee_max_batch=2)
    job = jobs.get_job(run_sweep(model.id, spec).id)
    _, rows = progress.configuration_progress(job)  # what the Jobs page's table shows
    left_out = [(r.label, r.status, r.why) for r in rows if r.status == "not run"]
    assert left_out == [("CPU FP16 b2", "not run", "batch 1 computed wrong outputs")]
    assert (job.state.value, job.progress_done, job.progress_total) == ("succeeded", 3, 4)
    assert progress.progress_of(job).fraction == 1.0  # done, not "75%" beside "succeeded"


def test_the_cli_sets_the_bound_and_prints_the_knee_sentence(
    data_dir: Path, tmp_path: Path
) -> None:
    zeros = model_factory.save(model_factory.make_fp16_wrong_model(nan=False), tmp_path / "z.onnx")
    assert optiboard("add", str(zeros)).returncode == 0
    refused = optiboard("run", "1", "--precisions", "fp16", "--min-cosine", "1.5")
    assert refused.returncode == 2 and "from 0 to 1" in refused.stderr
    assert jobs.list_jobs() == []  # refused before anything was queued

    run = optiboard("run", "1", "--precisions", "fp32,fp16", "--quick", "--find-knee",
                    "--knee-max-batch", "4")  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "onnxruntime/cpu/fp16/b1/" in run.stdout and ": wrong outputs" in run.stdout
    assert "cosine 0.0000 against FP32, below the bound 0.9;" in run.stdout
    stored = {(r.configuration.precision, r.configuration.batch_size): r.result
              for r in jobs.stored_results(1)}  # fmt: skip
    assert (Precision.FP16, 2) not in stored  # the knee search stopped at the wrong batch
    knee = run.stdout.split("\nknee:\n", 1)[1]
    assert (
        "CPU FP16: no knee: no batch ran; the search ended because batch 1 computed wrong" in knee
    )
    if (Precision.FP32, 4) in stored:  # at batch 4 throughput is still growing, or is not
        last, before = stored[(Precision.FP32, 4)], stored[(Precision.FP32, 2)]
        grew = last.throughput / before.throughput - 1
        verb = "still grew" if grew > 0 else "changed by"
        assert (
            f"CPU FP32: no knee up to batch 4: throughput {verb} {grew:.1%} from batch 2 to 4 "
            f"({last.throughput:.0f} samples/s, p50 {last.latency.p50:.3g} ms)"
        ) in knee
    else:  # a failure or a flat series ended it earlier: the sentence still cites a batch
        assert re.search(r"CPU FP32: (knee at|no knee up to) batch \d", knee)
    shown = optiboard("show", "1")
    assert "\nknee:\n" in shown.stdout and "wrong outputs" in shown.stdout

    lenient = optiboard("run", "1", "--precisions", "fp16", "--quick", "--min-cosine", "0")
    assert lenient.returncode == 0 and ": wrong outputs" not in lenient.stdout
    assert jobs.stored_results(2)[0].status == ResultStatus.OK  # cosine 0.0 meets a bound of 0


def test_runtimes_side_by_side_give_wrong_outputs_no_speed_ratio(
    data_dir: Path, nan_path: Path
) -> None:
    """ONNX Runtime's FP16 computes NaN here while OpenVINO's FP16 is right: only the latter
    gets a 'vs FP32' figure, and the former's cell says why."""
    from backend.reporting.side_by_side import runtimes_side_by_side

    model = add_model(nan_path, "fp16-nan")
    spec = SweepSpec(
        precisions=(Precision.FP32, Precision.FP16), backends=("onnxruntime", "openvino")
    )
    job = run_sweep(model.id, spec)
    statuses = {(r.configuration.backend, r.configuration.precision): r.status
                for r in jobs.stored_results(job.id)}  # fmt: skip
    assert statuses[("onnxruntime", Precision.FP16)] == ResultStatus.WRONG_OUTPUTS
    assert statuses[("openvino", Precision.FP16)] == ResultStatus.OK
    wide = runtimes_side_by_side(frames.results_frame(job_ids=[job.id])).set_index("precision")
    assert np.isnan(wide.loc["FP16", "ONNX Runtime CPU · vs FP32"])
    assert np.isfinite(wide.loc["FP16", "OpenVINO CPU · vs FP32"])
    assert wide.loc["FP16", "ONNX Runtime CPU · ran as"].startswith("wrong outputs: Outputs are")


def test_int8_on_u8s8_kernels_says_which_ran_and_without_vnni_blames_them(
    data_dir: Path, mlp_path: Path
) -> None:
    """Forced onto ONNX Runtime's fast U8S8 kernels, static INT8 of the test MLP saturates on a
    CPU without VNNI (cosine 0.88 on an AVX2 EPYC, under the 0.9 bound): stored as wrong outputs,
    and its notes name the kernels that ran and what they do there. With VNNI they are exact."""
    model = add_model(mlp_path, "mlp")
    fast = OrtOptions(int8_matmul=Int8Matmul.U8S8)
    job = run_sweep(
        model.id, SweepSpec(precisions=(Precision.FP32, Precision.INT8_STATIC), onnxruntime=fast)
    )
    [int8] = [
        r for r in jobs.stored_results(job.id) if r.configuration.precision.value == "int8_static"
    ]
    assert int8.result.runtime_facts["int8_matmul"] == "u8s8"
    frame = frames.results_frame(job_ids=[job.id]).set_index("precision")
    assert frame.loc["int8_static", "int8_matmul"] == "u8s8"  # asked
    assert frame.loc["int8_static", "int8_kernels"] == "u8s8"  # ran
    assert pd.isna(frame.loc["fp32", "int8_kernels"])  # no int8 kernels in an FP32 row
    if has_vnni():
        assert int8.status == ResultStatus.OK
    else:
        assert int8.status == ResultStatus.WRONG_OUTPUTS
        assert int8.result.notes[0].startswith("Outputs are wrong: cosine")
        assert any("ran as U8S8, as asked" in n and "saturate" in n for n in int8.result.notes)


def test_with_7_bit_weights_the_fast_int8_kernels_are_exact_on_any_x86_cpu(
    data_dir: Path, mlp_path: Path
) -> None:
    """The same forced U8S8 kernels on 7-bit weights (reduce_range): no sum can saturate, so
    static INT8 of the test MLP is ok, without VNNI too, and its notes say why where it lacks it."""
    model = add_model(mlp_path, "mlp")
    fast = OrtOptions(int8_matmul=Int8Matmul.U8S8)
    precisions = (Precision.FP32, Precision.INT8_STATIC)
    job = run_sweep(
        model.id, SweepSpec(precisions=precisions, onnxruntime=fast, int8_reduce_range=True)
    )
    stored = jobs.stored_results(job.id)
    [int8] = [r for r in stored if r.configuration.precision == Precision.INT8_STATIC]
    assert int8.status == ResultStatus.OK and "/w7/" in int8.configuration.key
    assert int8.result.accuracy.cosine_similarity > 0.99
    assert int8.result.runtime_facts["int8_matmul"] == "u8s8"
    if not has_vnni():
        assert any("7-bit" in n and "cannot saturate" in n for n in int8.result.notes)
