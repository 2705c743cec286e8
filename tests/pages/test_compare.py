"""Compare page: charts across jobs, speedups against a baseline, URL state, exports."""

from __future__ import annotations

import dataclasses
import io
import json
import platform
from pathlib import Path

import numpy as np
import onnxruntime
import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import _calculate_file_id as file_id
from streamlit.testing.v1 import AppTest

from backend.energy import meter_for
from backend.pricing import PRICE_KNOB
from backend.reporting import comparison, exports, frames, htmlreport, metrics
from backend.specs import MEASURE_PRESETS, Precision, SweepSpec
from pages.components.formatting import plain
from tests.pages.seed import (
    add_model,
    finished_sweep,
    open_page,
    run_sweep,
    texts,
    unavailable_provider,
)


def test_empty_compare_page_points_to_optimize(data_dir: Path) -> None:
    at = open_page("compare")
    assert not at.exception
    assert "No results to compare yet" in texts(at)


def test_compare_draws_every_chart_and_a_speedup_table(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path, "mlp")
    job, rows = finished_sweep(model.id)
    at = open_page("compare", jobs=job.id)
    assert not at.exception
    assert len(at.get("plotly_chart")) == 6  # the cost chart too (CPU is priced by default)
    table = at.dataframe[0].value
    assert len(table) == len(rows) == 4
    assert at.selectbox(key="url_baseline").value == htmlreport.EACH_MODEL
    [heading] = [h.value for h in at.subheader if h.value.startswith("Speedups against")]
    assert "mlp CPU FP32" in heading
    batch = table["label"].str.extract(r"b(\d+)$")[0]
    # a column of its own: a long label is cut before its batch, and rows then looked the same
    assert table["batch_size"].tolist() == batch.astype(int).tolist()
    # accuracy loss in its registry format (.3g: 0.0236), never Streamlit's 2.36e-2 of "%.2e"
    config = json.loads(at.dataframe[0].proto.columns)
    assert '"%.3g"' in json.dumps(config) and '"%.2e"' not in json.dumps(config), config
    # throughput grouped as the cheapest sentence writes it (1,136,658), not 1136657.5
    assert config["throughput"]["type_config"]["format"] == "localized", config["throughput"]
    fp32 = table["label"].str.contains("FP32")
    baseline_p50 = dict(zip(batch[fp32], table.loc[fp32, "p50_ms"], strict=True))
    assert np.allclose(table["speedup"], batch.map(baseline_p50) / table["p50_ms"])
    # the front holds firm rows only (stable, over a stable baseline): on a busy host there may be
    # none, and then no row is starred
    firm = table["stable"].ne(False) & table["speedup_firm"]
    assert table["pareto"].any() == firm.any() and not (table["pareto"] & ~firm).any(), table
    cpu = meter_for("cpu")  # J/sample is measured where RAPL reads, else the reason is shown
    assert ("j_per_sample" in table and table["j_per_sample"].notna().all()) == cpu.measurable
    assert f"Energy (J/sample, idle W): {plain(cpu.source)}" in texts(at)
    # and what ran them: the runtime's own version and this host
    ran = plain(f"onnxruntime {onnxruntime.__version__} (default env)")
    assert f"What ran: {ran}" in texts(at) and plain(f"host {platform.node()}") in texts(at)


def test_compare_state_lives_in_the_url_and_restores_the_same_view(
    data_dir: Path, mlp_path: Path, cnn_path: Path
) -> None:
    first, _ = finished_sweep(add_model(mlp_path, "mlp").id, batch_sizes=(1,), label="mlp sweep")
    second, rows = finished_sweep(
        add_model(cnn_path, "cnn").id, precisions=(Precision.FP32, Precision.FP16), batch_sizes=(1,)
    )
    at = open_page("compare", jobs=f"{first.id},{second.id}")
    at.toggle(key="url_all").set_value(False).run()
    keep = [r.id for r in rows[:2]]
    at.multiselect(key="url_configs").set_value(keep).run()
    at.pills(key="url_charts").set_value(["latency", "pareto"]).run()
    url = {k: at.query_params[k] for k in ("jobs", "configs", "charts", "all", "baseline")}
    assert url["configs"] == ",".join(str(r) for r in keep)

    fresh = open_page("compare", **url)
    assert not fresh.exception
    assert fresh.multiselect(key="url_jobs").value == [first.id, second.id]
    assert fresh.multiselect(key="url_configs").value == keep
    assert len(fresh.get("plotly_chart")) == 2
    assert len(fresh.dataframe[0].value) == 2
    assert fresh.selectbox(key="url_baseline").value == url["baseline"]


def test_two_models_each_get_their_own_baseline_and_the_table_leads_with_speedup(
    data_dir: Path, mlp_path: Path, cnn_path: Path
) -> None:
    """The walkthrough compared an MLP and a CNN job: every CNN row had no speedup (all were
    divided by the MLP's FP32), so the accuracy/speedup chart showed the MLP alone; and the
    speedup columns sat behind five empty energy columns, off a 1500 px screen."""
    first, _ = finished_sweep(add_model(mlp_path, "mlp").id, batch_sizes=(1,), label="mlp sweep")
    two = (Precision.FP32, Precision.FP16)
    second, _ = finished_sweep(add_model(cnn_path, "cnn").id, precisions=two, batch_sizes=(1,))
    at = open_page("compare", jobs=f"{first.id},{second.id}")
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert list(table.columns[:4]) == ["label", "batch_size", "speedup", "speedup_firm"]
    assert table["speedup"].notna().all(), table  # the CNN's rows too, over the CNN's FP32
    fp32 = table[table["label"].str.contains("FP32")]
    assert len(fp32) == 2 and np.allclose(fp32["speedup"], 1.0)
    texts_now = texts(at)
    assert "Each job's rows are divided by that job's own first FP32 series" in texts_now
    if table.filter(like="j_per_sample").empty:  # energy not measurable on this host
        assert "Not shown, empty in every row: energy (J/sample" in texts_now
    chart = next(
        c for c in at.get("plotly_chart") if "Accuracy loss against speedup" in c.proto.spec
    )
    assert "cnn" in chart.proto.spec and "mlp" in chart.proto.spec

    # the picker still works: the MLP's FP32 gives the CNN's rows no partner, so no speedup
    mlp_fp32 = next(
        s for s in at.selectbox(key="url_baseline").options if "mlp" in s and "FP32" in s
    )
    at.selectbox(key="url_baseline").set_value(mlp_fp32).run()
    table = at.dataframe[0].value
    assert table.loc[table["label"].str.contains("cnn"), "speedup"].isna().all()
    assert table.loc[table["label"].str.contains("mlp"), "speedup"].notna().all()


def test_two_jobs_of_one_model_each_divide_by_their_own_fp32(
    data_dir: Path, mlp_path: Path
) -> None:
    """The walkthrough compared two jobs of one MLP (jobs=1,4): job 4's b16 and b64 rows read
    speedup "-", divided by job 1's FP32 (which ran b1 and b8 only) though job 4 measured its
    own FP32 b16 and b64. A job with no FP32 of its own still falls back to its model's first."""
    model = add_model(mlp_path, "mlp")
    first, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(1,))
    second, _ = finished_sweep(model.id, precisions=(Precision.FP32,), batch_sizes=(2,))
    third, _ = finished_sweep(model.id, precisions=(Precision.INT8_STATIC,), batch_sizes=(1,))
    ids = [first.id, second.id, third.id]
    view, named = comparison.speedups_each_job(frames.results_frame(job_ids=ids))
    assert view["speedup"].notna().all(), view[["label", "speedup"]]
    assert named == [f"#{first.id} mlp CPU FP32", f"#{second.id} mlp CPU FP32"], named
    at = open_page("compare", jobs=",".join(map(str, ids)))
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert table["speedup"].notna().all(), table[["label", "speedup"]]
    [heading] = [h.value for h in at.subheader if h.value.startswith("Speedups against")]
    assert f"#{first.id} mlp CPU FP32" in heading and f"#{second.id} mlp CPU FP32" in heading
    # the picker still works: the first job's FP32 leaves the second job's b2 with no partner
    at.selectbox(key="url_baseline").set_value(f"#{first.id} mlp CPU FP32").run()
    table = at.dataframe[0].value
    assert table.loc[table["batch_size"] == 2, "speedup"].isna().all(), table


def test_failed_configurations_are_listed_with_their_error(data_dir: Path, mlp_path: Path) -> None:
    missing = unavailable_provider()
    if missing is None:
        pytest.skip("every ONNX Runtime provider is available on this machine")
    model = add_model(mlp_path)
    job = run_sweep(model.id, SweepSpec(providers=("cpu", missing)))
    at = open_page("compare", jobs=job.id)
    failed = at.dataframe[1].value
    assert list(failed["status"]) == ["unavailable"]
    assert failed["error"].iloc[0]  # the worker's reason, e.g. which provider is missing


def _compared(job_id: int, baseline: str, keep: list[int] | None = None) -> pd.DataFrame:
    """The comparison table as the backend computes it for this selection and baseline."""
    view = frames.results_frame(job_ids=[job_id])
    if keep is not None:
        view = view[view["result_id"].isin(keep)]
    if baseline == htmlreport.EACH_MODEL:  # the page's default: each job's own first FP32
        view = comparison.speedups_each_job(view)[0]
    else:
        view = frames.add_speedups(view, baseline)
    view = frames.add_pareto(
        frames.add_accuracy_loss(view)
    )  # of stable measurements, as the page computes it
    return frames.add_cost_pareto(view, "cost_per_million")  # CPU is priced by default


def _offered(at: AppTest, label: str) -> str:
    """The media URL of a download button: its file id is a hash of the bytes it serves."""
    return next(b.proto.url for b in at.get("download_button") if b.proto.label == label)


def test_downloads_hold_the_compared_configurations(data_dir: Path, mlp_path: Path) -> None:
    job, rows = finished_sweep(add_model(mlp_path, "mlp").id)
    at = open_page("compare", jobs=job.id)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["CSV", "JSON", "HTML report"]
    baseline = at.selectbox(key="url_baseline").value
    every = _compared(job.id, baseline)
    assert len(every) == 4 and every["speedup"].notna().all()
    csv = exports.export_csv(every)
    json_data = exports.export_json(every)
    assert _offered(at, "CSV").endswith(file_id(csv, "text/csv", "optiboard-results.csv") + ".csv")
    assert _offered(at, "JSON").endswith(
        file_id(json_data, "application/json", "optiboard-results.json") + ".json"
    )
    # fewer configurations picked: the files hold exactly those, nothing else
    keep = [r.id for r in rows[:2]]
    at.toggle(key="url_all").set_value(False).run()
    at.multiselect(key="url_configs").set_value(keep).run()
    picked = exports.export_csv(_compared(job.id, baseline, keep))
    assert _offered(at, "CSV").endswith(
        file_id(picked, "text/csv", "optiboard-results.csv") + ".csv"
    )
    assert len(pd.read_csv(io.BytesIO(picked))) == 2


def test_runtimes_side_by_side_per_precision_against_one_reference(
    data_dir: Path, cnn_path: Path, mlp_path: Path
) -> None:
    """ONNX Runtime and OpenVINO measured by the real worker, shown next to each other; with a
    second model swept at FP32 on ONNX Runtime only, no row for a precision that model never ran
    (the pivot gave every model every precision, rows of dashes)."""
    pytest.importorskip("openvino")
    model = add_model(cnn_path, "cnn")
    spec = SweepSpec(
        precisions=(Precision.FP32, Precision.BF16),
        backends=("onnxruntime", "openvino"),
        measure=MEASURE_PRESETS["quick"],
    )
    job = run_sweep(model.id, spec)
    one = dataclasses.replace(spec, precisions=(Precision.FP32,), backends=("onnxruntime",))
    other = run_sweep(add_model(mlp_path, "mlp").id, one)
    at = open_page("compare", jobs=f"{job.id},{other.id}")
    assert not at.exception
    assert "Runtimes side by side" in texts(at)
    [table] = [d.value for d in at.dataframe if "OpenVINO CPU · ran as" in d.value.columns]
    assert sorted(zip(table["model"], table["precision"], strict=True)) == [
        ("cnn", "BF16"), ("cnn", "FP32"), ("mlp", "FP32")
    ]  # fmt: skip
    table = table[table["model"] == "cnn"].set_index("precision")
    assert list(table.index) == ["FP32", "BF16"]
    assert table.at["FP32", "ONNX Runtime CPU · vs FP32"] == pytest.approx(1.0)
    assert table.at["FP32", "OpenVINO CPU · ran as"] == "f32"
    assert table.at["FP32", "OpenVINO CPU · cosine"] > 0.9999
    assert table.at["BF16", "ONNX Runtime CPU · ran as"].startswith("unavailable: ")
    ran = str(table.at["BF16", "OpenVINO CPU · ran as"])
    assert ran == "bf16" or ran.endswith("(compiled for bf16)") or ran.startswith("unavailable: ")
    assert "nan" not in set(table.filter(like="ran as").astype(str).to_numpy().ravel())


def test_gpu_results_recorded_on_an_h200_show_copy_share_and_distance_to_peak(
    data_dir: Path, mlp_path: Path
) -> None:
    """The H200 results of bench/results/h200_gpu_depth_resnet50.json, stored as a worker would."""
    import json

    from backend.queue import jobs
    from backend.specs import IoMode
    from storage.repo import results as result_store

    model = add_model(mlp_path, "resnet50")
    spec = SweepSpec(
        precisions=(Precision.FP32, Precision.FP16),
        providers=("cuda",),
        batch_sizes=(1, 512),
        io_modes=(IoMode.END_TO_END, IoMode.DEVICE),
    )
    job = jobs.submit_sweep(model.id, spec)
    recorded = Path(__file__).resolve().parents[2] / "bench/results/h200_gpu_depth_resnet50.json"
    wanted = {c.key for c in spec.configurations()}
    for row in json.loads(recorded.read_text()):
        if row["config_key"] in wanted:
            assert result_store.save_result(job.id, row, []) is not None
    at = open_page("compare", jobs=job.id)
    assert not at.exception
    assert "Distance to the hardware" in texts(at)
    table = next(d.value for d in at.dataframe if "peak_fraction" in d.value.columns)
    assert len(table) == len(wanted) == 8
    pairs = table.dropna(subset=["copy_share"])
    assert len(pairs) == 8  # every configuration here was timed both ways
    frame = frames.results_frame(job_ids=[job.id]).set_index("config_key")
    e2e = frame.loc["onnxruntime/cuda/fp16/b512/fixed/all/t0"]
    device = frame.loc["onnxruntime/cuda/fp16/b512/fixed/all/t0/device"]
    share = (e2e["p50_ms"] - device["p50_ms"]) / e2e["p50_ms"]
    assert e2e["copy_share"] == pytest.approx(share) == device["copy_share"]
    assert device["tflops"] > e2e["tflops"] and 0 < device["peak_fraction"] < 1
    assert device["mlperf_share"] == pytest.approx(device["throughput"] / 94_600)
    jobs_page = open_page("jobs", job=job.id)
    assert not jobs_page.exception
    listed = next(d.value for d in jobs_page.dataframe if "of GPU peak" in d.value.columns)
    assert listed["of GPU peak"].notna().sum() == 8


def test_compare_prices_by_the_link_and_draws_the_cost_axis(data_dir: Path, mlp_path: Path) -> None:
    job, _ = finished_sweep(add_model(mlp_path, "mlp").id)
    at = open_page("compare", jobs=job.id, price="cpu=2")
    assert not at.exception
    table = next(d.value for d in at.dataframe if "cost_per_million" in d.value.columns)
    by_hand = 2.0 / (table["throughput"] * 3600) * 1e6  # $2 an hour over samples an hour
    assert np.allclose(table["cost_per_million"], by_hand) and (table["price_per_hour"] == 2).all()
    assert "chart_cost" in [c.key for c in at.get("plotly_chart")]
    offered = at.selectbox(key="url_cost").options  # energy too where this host measures it
    assert offered[0] == metrics.REGISTRY["cost_per_million"].axis_title  # money first
    assert "The cheapest configuration is " in texts(at)
    assert "No price for" not in texts(at)
    unpriced = open_page("compare", jobs=job.id, price="gpu=1")  # the cost chart was left out
    assert "chart_cost" not in [c.key for c in unpriced.get("plotly_chart")]  # without a word
    assert plain(
        "No price for cpu, so its configurations have no cost: add cpu=DOLLARS to the price per "
        "hour above."
    ) in [w.value for w in unpriced.warning]
    box = at.text_input(key="url_price")  # the sweep's declared knob, as on Optimize and Serve
    assert box.label == PRICE_KNOB["label"] and box.help.startswith(PRICE_KNOB["help"])
    box.input("cpu=free").run()  # refused: the job's own prices stay
    assert not at.exception
    assert any("not 'cpu=free'" in e.value.replace("\\", "") for e in at.error)
    table = next(d.value for d in at.dataframe if "cost_per_million" in d.value.columns)
    assert (table["price_per_hour"] == 0.40).all()  # OPTIBOARD_PRICE_PER_HOUR, stored when queued


def test_jobs_priced_differently_say_so_beside_the_cheapest(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path, "mlp")
    spec = SweepSpec(precisions=(Precision.FP32,), batch_sizes=(1,))
    cheap = run_sweep(model.id, dataclasses.replace(spec, prices=(("cpu", 0.4),)), label="cheap")
    dear = run_sweep(model.id, dataclasses.replace(spec, prices=(("cpu", 1.0),)), label="dear")
    at = open_page("compare", jobs=f"{cheap.id},{dear.id}")
    assert not at.exception, at.exception
    sentence = plain(
        "These jobs were priced differently, so their costs are not like for like: cpu at "
        f"$0.40/h in job {cheap.id}, $1.00/h in job {dear.id} (each job's stored prices; give one "
        "price table above to compare them alike)."
    )
    assert sentence in [w.value for w in at.warning]
    at = open_page("compare", jobs=f"{cheap.id},{dear.id}", price="cpu=0.5")  # one table: alike
    assert "priced differently" not in texts(at)
    assert "priced differently" not in texts(open_page("compare", jobs=cheap.id))
