"""Compare page: an unstable measurement is never on the Pareto front; where it measured beyond
it, the caption under the chart names it with its numbers."""

from __future__ import annotations

from pathlib import Path

from backend.reporting import frames
from backend.specs import Precision, SweepSpec
from tests.pages.seed import add_model, open_page, run_sweep, stored_again, texts


def test_an_unstable_result_beyond_the_front_is_left_off_and_the_caption_names_it(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path, "mlp")
    spec = SweepSpec(precisions=(Precision.FP32, Precision.INT8_DYNAMIC), batch_sizes=(1, 4))
    ran = run_sweep(model.id, spec)
    measured = frames.results_frame(job_ids=[ran.id])
    slower = measured[measured["batch_size"] == 1].sort_values("p50_ms").iloc[-1]
    # against the slower precision at batch 1, the other's fastest row leads the front alone
    view = frames.add_speedups(measured, str(slower["series"]))
    fastest = view.loc[view["speedup"].idxmax()]
    job_id = stored_again(ran, {str(fastest["config_key"])})

    stored = frames.results_frame(job_ids=[job_id]).set_index("config_key")
    baseline = stored.at[str(slower["config_key"]), "series"]
    label = stored.at[str(fastest["config_key"]), "label"]
    at = open_page("compare", jobs=job_id, baseline=baseline)
    assert not at.exception, at.exception
    table = at.dataframe[0].value.set_index("label")
    assert not table.at[label, "pareto"] and table["pareto"].any()
    captions = [c.value.replace("\\", "") for c in at.caption]  # shown as escaped plain text
    said = next(c for c in captions if "measured beyond the Pareto front" in c)
    speedup = f"{table.at[label, 'speedup']:.2f}x"
    assert said.startswith(
        f"{label} measured beyond the Pareto front (speedup vs baseline {speedup}"
    )
    assert "its measurement was unstable, so it is drawn hollow and left off the front" in said

    # every verdict stable: the same row leads the front and no caption says otherwise
    steady = stored_again(ran, set())
    again = open_page("compare", jobs=steady, baseline=baseline.replace(f"#{job_id}", f"#{steady}"))
    assert not again.exception
    table = again.dataframe[0].value.set_index("label")
    assert table.at[label.replace(f"#{job_id}", f"#{steady}"), "pareto"]
    assert "measured beyond the Pareto front" not in texts(again)


def test_two_models_each_keep_their_own_front_on_the_page(
    data_dir: Path, mlp_path: Path, cnn_path: Path
) -> None:
    """Both models' FP32 rows read 1.00x against their own FP32; one front over both starred
    one of them only. Each model's own: both starred, and the caption says what a front spans."""
    spec = SweepSpec(precisions=(Precision.FP32, Precision.INT8_DYNAMIC), batch_sizes=(1,))
    mlp = run_sweep(add_model(mlp_path, "mlp").id, spec)
    cnn = run_sweep(add_model(cnn_path, "cnn").id, spec)
    # every verdict stable (a busy host's cannot be chosen): an unstable row is on no front
    jobs = [stored_again(mlp, set()), stored_again(cnn, set())]
    at = open_page("compare", jobs=",".join(map(str, jobs)))
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    fp32 = table[table["label"].str.contains(" FP32 ")]
    assert len(fp32) == 2 and (fp32["speedup"] == 1.0).all(), table
    assert fp32["pareto"].all(), table[["label", "speedup", "accuracy_loss", "pareto"]]
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert any(c.startswith("Starred: each model's own Pareto front") for c in captions)
    chart = next(
        c for c in at.get("plotly_chart") if "Accuracy loss against speedup" in c.proto.spec
    )
    assert "Pareto front (mlp)" in chart.proto.spec and "Pareto front (cnn)" in chart.proto.spec
