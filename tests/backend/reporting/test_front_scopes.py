"""Each model, and each baseline a job divides by, has a Pareto front of its own: a speedup is a
ratio over its own baseline, so a front across two models' ratios let one model's point push
another's off (two FP32 rows, both 1.00x, and one of them starred)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from backend.reporting import charts, comparison, cost, frames, front, htmlreport
from backend.specs import Precision, SweepSpec
from tests.pages.seed import add_model, run_sweep, steady

SPEC = SweepSpec(precisions=(Precision.FP32, Precision.INT8_DYNAMIC), batch_sizes=(1,))


def _prepared(job_ids: list[int]) -> pd.DataFrame:
    """The view as the page prepares it by default (each job's own FP32, mean relative error,
    cost per million at cpu=$1/h), every row judged stable: a busy host's verdicts cannot be
    chosen, and an unstable row is on no front (test_front.py tests that)."""
    frame = cost.reprice(steady(frames.results_frame(job_ids=job_ids)), (("cpu", 1.0),))
    return htmlreport.prepared(frame, htmlreport.EACH_MODEL, "mean_rel_error", "cost_per_million")


def _fp32_rows(view: pd.DataFrame) -> pd.DataFrame:
    return view[view["precision"] == Precision.FP32.value]


def test_two_models_each_keep_their_own_front(
    data_dir: Path, mlp_path: Path, cnn_path: Path
) -> None:
    mlp = run_sweep(add_model(mlp_path, "mlp").id, SPEC)
    cnn = run_sweep(add_model(cnn_path, "cnn").id, SPEC)
    view = _prepared([mlp.id, cnn.id])
    fp32 = _fp32_rows(view)
    assert len(fp32) == 2 and (fp32["speedup"] == 1.0).all()  # each over its own FP32
    # one front over both models' ratios: of two 1.00x rows, the one with the smaller loss (or,
    # losses equal, the first) pushes the other off, though nothing of its own model beats it
    across = pd.Series(front.front_mask(view, front.SPEEDUP_FRONT), index=view.index)
    assert across[fp32.index].sum() == 1, view[["label", "speedup", "accuracy_loss"]]
    for model, rows in view.groupby("model"):
        alone = front.front_mask(rows, front.SPEEDUP_FRONT)
        assert view.loc[rows.index, "pareto"].tolist() == alone.tolist(), model
    assert view.loc[fp32.index, "pareto"].all()  # each model's FP32, its most accurate row

    figure = charts.accuracy_vs_speedup(view, "loss")
    starred = {t.name: list(t.text) for t in figure.data if t.name.startswith("Pareto front")}
    assert set(starred) == {"Pareto front (mlp)", "Pareto front (cnn)"}, starred
    for name, labels in starred.items():  # one line per model, never joining the two
        assert all(f" {name[14:-1]} " in label for label in labels), starred

    captions = htmlreport.chart_captions(view, "cost_per_million")
    assert captions["pareto"].startswith(
        "Starred: each model's own Pareto front, not one across models: a speedup is a ratio "
        "over its own baseline, and ratios over different baselines are not one scale."
    )
    assert captions["cost"].startswith(  # the cost front is each model's too, as cost.py said
        "Starred: each model's own Pareto front, not one across models: one model's "
        "configuration is no alternative to another's"
    )
    said = htmlreport.report_sentences(view, htmlreport.EACH_MODEL, "cost_per_million")
    assert captions["pareto"] in said and captions["cost"] in said  # the HTML report's too


def test_two_jobs_of_one_model_each_keep_their_baselines_front(
    data_dir: Path, mlp_path: Path
) -> None:
    """Two sweeps of one MLP, each divided by its own FP32 (comparison.speedups_each_job): two
    baselines, two fronts; a baseline picked for both makes one ratio scale, so one front."""
    model = add_model(mlp_path, "mlp")
    first = run_sweep(model.id, SPEC, label="first")
    second = run_sweep(model.id, SPEC, label="second")
    view = _prepared([first.id, second.id])
    fp32 = _fp32_rows(view)
    baselines = comparison.each_job_baselines(view)
    assert view.loc[fp32.index, "speedup_baseline"].tolist() == list(baselines.values())
    across = front.front_mask(view, front.SPEEDUP_FRONT)
    assert across[view.index.get_indexer(fp32.index)].sum() == 1  # one front: one FP32 starred
    assert view.loc[fp32.index, "pareto"].all()  # each job's baseline front: both
    names = {t.name for t in charts.accuracy_vs_speedup(view, "loss").data}
    assert {f"Pareto front (vs {b})" for b in baselines.values()} <= names, names
    assert htmlreport.chart_captions(view, None)["pareto"].startswith(
        "Starred: each baseline's own Pareto front (each job divides by its own):"
    )

    picked = htmlreport.prepared(view, baselines[first.id], "mean_rel_error", None)
    assert picked["speedup_baseline"].dropna().unique().tolist() == [baselines[first.id]]
    assert front.span_sentence(picked, front.SPEEDUP_FRONT) is None
    alone = front.front_mask(picked, front.SPEEDUP_FRONT)
    assert picked["pareto"].tolist() == alone.tolist()  # one ratio scale: one front
