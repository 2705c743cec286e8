"""Cost per million inferences in the results frame and the CLI (reporting/cost.py): a
configuration with wrong outputs is timed but never priced, so never the cheapest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend import pricing
from backend.cli import main
from backend.reporting import cost, frames
from backend.specs import Precision, SweepSpec
from tests import models as model_factory
from tests.pages.seed import add_model, run_sweep


def test_wrong_outputs_are_never_the_cheapest(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = model_factory.save(model_factory.make_fp16_wrong_model(), tmp_path / "nan.onnx")
    spec = SweepSpec(precisions=(Precision.FP32, Precision.FP16))
    job = run_sweep(add_model(path, "fp16-nan").id, spec)
    frame = cost.reprice(frames.results_frame(job_ids=[job.id]), (("cpu", 1000.0),))
    by_status = frame.set_index("status")
    assert by_status.loc["wrong outputs", "throughput"] > 0  # timed, yet not priced
    assert np.isnan(by_status.loc["wrong outputs", "cost_per_million"])
    ok = by_status.loc["ok"]
    assert ok["cost_per_million"] == pytest.approx(1000.0 / (ok["throughput"] * 3600) * 1e6)
    found = cost.cheapest(frame)
    assert found is not None and "FP32" in found.label and found.runner_up is None
    throughput = cost.rate_text(ok["throughput"])  # 79,972 where it used to read 79972.0
    assert f"({throughput} samples/s measured, $1000/h for cpu)" in found.sentence
    assert [cost.rate_text(v) for v in (79972.04, 45.678, 0.41234)] == ["79,972", "45.7", "0.412"]
    assert main(["show", str(job.id), "--price", "cpu=1000"]) == 0
    printed = capsys.readouterr().out
    assert f"The cheapest configuration is {found.label} at $" in printed
    assert "$/M: dollars per million inferences" in printed and "at cpu=1000 " in printed


def test_an_unstable_measurement_is_named_but_never_recommended_as_the_cheapest(
    data_dir: Path, mlp_path: Path
) -> None:
    spec = SweepSpec(precisions=(Precision.FP32, Precision.INT8_DYNAMIC), batch_sizes=(1, 4))
    job = run_sweep(add_model(mlp_path).id, spec)
    frame = cost.reprice(frames.results_frame(job_ids=[job.id]), (("cpu", 1.0),))
    # which run stalls cannot be chosen on a real host, so the stored verdicts are set here:
    # every row measured stable, then the cheapest one not
    frame["stable"] = True
    by_cost = frame.sort_values("cost_per_million")
    cheapest_row, second, third = (by_cost.iloc[i] for i in range(3))
    assert cost.cheapest(frame).label == cheapest_row["label"]

    frame.loc[frame["result_id"] == cheapest_row["result_id"], "stable"] = False
    found = cost.cheapest(frame)
    assert (found.label, found.runner_up) == (second["label"], third["label"])
    assert f"for cpu) among stable measurements; the runner-up, {third['label']}" in found.sentence
    assert found.sentence.endswith(
        " Left out as unstable, though measured cheaper than the runner-up: "
        f"{cheapest_row['label']} at {pricing.dollars(cheapest_row['cost_per_million'])}; its "
        "throughput, so its cost, moved while measured: re-run it on a quiet host."
    )

    # the walkthrough's case: an unstable row cheaper than the runner-up, not than the pick,
    # is named too (the sentence's runner-up was not the table's second cheapest row)
    frame["stable"] = True
    frame.loc[frame["result_id"] == second["result_id"], "stable"] = False
    found = cost.cheapest(frame)
    assert (found.label, found.runner_up) == (cheapest_row["label"], third["label"])
    assert found.sentence.endswith(
        " Left out as unstable, though measured cheaper than the runner-up: "
        f"{second['label']} at {pricing.dollars(second['cost_per_million'])}; its "
        "throughput, so its cost, moved while measured: re-run it on a quiet host."
    )

    frame["stable"] = False  # nothing stable: the ranking stands, with its warning
    found = cost.cheapest(frame)
    assert found.label == cheapest_row["label"]
    assert "Every priced measurement was unstable" in found.sentence


def test_two_models_are_priced_each_on_its_own(
    data_dir: Path, mlp_path: Path, cnn_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The walkthrough's jobs=1,2 (an MLP and a CNN): the cheapest sentence picked the MLP's
    configuration over the CNN's, and the cost front held the MLP alone (the MLP's cheap rows
    dominated every CNN row, though no CNN row can be swapped for an MLP one)."""
    spec = SweepSpec(precisions=(Precision.FP32, Precision.INT8_DYNAMIC), batch_sizes=(1,))
    mlp = run_sweep(add_model(mlp_path, "mlp").id, spec)
    cnn = run_sweep(add_model(cnn_path, "cnn").id, spec)
    frame = cost.reprice(frames.results_frame(job_ids=[mlp.id, cnn.id]), (("cpu", 1.0),))
    said = cost.cheapest_sentences(frame)
    assert len(said) == 2 and said[0].startswith(
        f"For mlp, the cheapest configuration is #{mlp.id} mlp"
    )
    assert said[1].startswith(f"For cnn, the cheapest configuration is #{cnn.id} cnn"), said
    frame["stable"] = True  # a busy host's verdicts cannot be chosen: every row judged stable
    fronted = cost.add_cost_pareto(frames.add_accuracy_loss(frame), "cost_per_million")
    for model in ("mlp", "cnn"):  # each model has a front of its own
        on = fronted.loc[fronted["model"] == model, "cost_pareto"]
        assert on.any(), fronted[["label", "cost_per_million", "accuracy_loss", "cost_pareto"]]
    assert main(["compare", str(mlp.id), str(cnn.id), "--price", "cpu=1"]) == 0
    printed = capsys.readouterr().out
    assert "\nFor mlp, the cheapest configuration is" in printed
    assert "\nFor cnn, the cheapest configuration is" in printed
