"""Cost per million inferences in the results frame and the CLI (reporting/cost.py): a
configuration with wrong outputs is timed but never priced, so never the cheapest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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
    assert main(["show", str(job.id), "--price", "cpu=1000"]) == 0
    printed = capsys.readouterr().out
    assert f"The cheapest configuration is {found.label} at $" in printed
    assert "$/M inf: dollars per million inferences" in printed and "at cpu=1000 " in printed
