"""Results as DataFrames: speedups per batch, the Pareto front, exports and the HTML report."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import numpy as np
import onnxruntime

from backend.reporting import charts, exports, frames
from backend.reporting.metrics import REGISTRY, pareto_front
from backend.specs import Precision
from tests.pages.seed import add_model, finished_sweep, steady


def test_results_frame_has_one_row_per_configuration_with_latency(
    data_dir: Path, mlp_path: Path
) -> None:
    job, rows = finished_sweep(add_model(mlp_path, "mlp").id)
    frame = frames.results_frame(job_ids=[job.id])
    assert sorted(frame["result_id"]) == sorted(r.id for r in rows)
    assert set(frame["model"]) == {"mlp"}
    assert (frame["p50_ms"] <= frame["p99_ms"]).all()
    assert set(frame["batch_size"]) == {1, 4}


def test_speedup_compares_with_the_baseline_at_the_same_batch(
    data_dir: Path, mlp_path: Path
) -> None:
    job, _ = finished_sweep(add_model(mlp_path).id, batch_sizes=(1,))
    frame = frames.results_frame(job_ids=[job.id])
    fp32 = next(s for s in frame["series"] if "FP32" in s)
    out = frames.add_speedups(frame, fp32)
    for row in out.itertuples():
        base = frame[(frame["series"] == fp32) & (frame["batch_size"] == row.batch_size)]
        assert np.isclose(row.speedup, base["p50_ms"].iloc[0] / row.p50_ms)


def test_a_speedup_is_firm_only_where_both_sides_measured_stable(
    data_dir: Path, mlp_path: Path
) -> None:
    """A browser walkthrough saw "Firm speedup" ticked beside an unstable row's speedup of 1.35
    (its throughput ratio 0.18): the row's own stability counts too, and no speedup is none."""
    job, _ = finished_sweep(add_model(mlp_path).id, batch_sizes=(1, 4))
    frame = steady(frames.results_frame(job_ids=[job.id]))
    fp32 = next(s for s in frame["series"] if "FP32" in s)
    other = frame.index[(frame["series"] != fp32) & (frame["batch_size"] == 1)][0]
    frame.loc[other, "stable"] = False
    frame = frame[~((frame["series"] == fp32) & (frame["batch_size"] == 4))]  # no partner at 4
    out = frames.add_speedups(frame, fp32)
    assert np.isfinite(out.at[other, "speedup"]) and not out.at[other, "speedup_firm"]
    unpartnered = out.index[out["batch_size"] == 4]
    assert out.loc[unpartnered, "speedup"].isna().all()
    assert not out.loc[unpartnered, "speedup_firm"].any()
    calm = out.index[(out["batch_size"] == 1) & (out.index != other)]
    assert out.loc[calm, "speedup_firm"].all()  # FP32 against itself: stable both sides


def test_a_speedup_its_own_throughput_disputes_is_not_firm(data_dir: Path, mlp_path: Path) -> None:
    """The audit's row (bench/audit_sweep.py): a CNN's static INT8 at batch 8, both sides
    stable, its median call 4.99x FP32's and its throughput 2.53x (stalls: mean 2x its median);
    its why line said "Speed not explained", yet the speedup was ticked firm and starred on the
    front. An independent timing gave 2.81x. Speeds that disagree are no firm figure."""
    job, _ = finished_sweep(add_model(mlp_path).id, batch_sizes=(1,))
    frame = steady(frames.results_frame(job_ids=[job.id]))
    fp32 = next(s for s in frame["series"] if "FP32" in s)
    other = frame.index[frame["series"] != fp32][0]
    assert frames.add_speedups(frame, fp32).at[other, "speedup_firm"]  # one speed: firm
    frame.loc[other, "throughput"] /= 1.97  # 4.99x by the median call, 2.53x by throughput
    out = frames.add_speedups(frame, fp32)
    assert out.at[other, "stable"] and np.isfinite(out.at[other, "speedup"])
    assert np.isclose(out.at[other, "speedup"] / out.at[other, "throughput_ratio"], 1.97)
    assert not out.at[other, "speedup_firm"]
    assert out.loc[out["series"] == fp32, "speedup_firm"].all()


def test_pareto_front_keeps_only_undominated_points() -> None:
    speedup = np.array([1.0, 2.0, 2.0, 1.5, np.nan])
    loss = np.array([0.0, 0.01, 0.02, 0.05, 0.0])
    front = pareto_front(REGISTRY["speedup"], speedup, REGISTRY["accuracy_loss"], loss)
    assert front.tolist() == [True, True, False, False, False]


def test_exports_round_trip_and_report_is_self_contained(data_dir: Path, mlp_path: Path) -> None:
    job, _ = finished_sweep(add_model(mlp_path).id, precisions=(Precision.FP32,), batch_sizes=(1,))
    frame = frames.results_frame(job_ids=[job.id])
    frame = frames.add_accuracy_loss(frames.add_speedups(frame, frame["series"][0]))
    records = json.loads(exports.export_json(frame))
    assert [r["result_id"] for r in records] == frame["result_id"].tolist()
    assert exports.export_csv(frame).decode().splitlines()[0].startswith("result_id,")
    html = exports.html_report("t", frame, [charts.latency_vs_batch(frame)], None)
    assert "<script src=" not in html  # plotly.js is inlined, nothing is fetched
    assert "Plotly.newPlot" in html and len(html) > 1_000_000
    # the registry says what each figure of the table is and which way is better
    assert "<code>p50_ms</code>: p50 latency (ms), lower is better" in html
    assert "<code>throughput</code>: throughput (samples/s), higher is better" in html
    # and what ran the numbers: the runtime's own version, the CPU and the host

    (row,) = frame.to_dict("records")
    assert row["software"].startswith(f"onnxruntime {onnxruntime.__version__} (default env)")
    assert row["hardware"].endswith("logical cores") and row["ran_on"] == platform.node()
    assert f"What ran: onnxruntime {onnxruntime.__version__} (default env)" in html
    table = html.split("<h2>All configurations</h2>")[1]
    assert ">None<" not in table and ">nan<" not in table  # empty cells are "–"


def test_layers_by_precision_are_said_most_first_and_one_precision_is_left_to_the_hint() -> None:
    """OpenVINO compiles a static INT8 graph for f32 and runs its int8 layers in i8: "ran as f32"
    beside a 7x speedup said the opposite of what ran."""
    assert frames.layers_said({"i8": 12, "f32": 30}) == "f32 30 layers, i8 12"
    assert frames.layers_said({"f32": 30}) is None  # the execution precision says it
    assert frames.layers_said(None) is None and frames.layers_said({}) is None
