"""Wrong outputs on the pages: Jobs and Compare show the status and why, Compare keeps such rows
out of its speedups and Pareto front, Optimize sets the bound, Jobs states the knee.

Real worker runs on tests/models.make_fp16_wrong_model, whose FP16 variant really computes NaN.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.queue import jobs
from backend.specs import Precision, SweepSpec
from pages.components.formatting import plain
from tests import models as model_factory
from tests.pages.seed import add_model, open_page, run_sweep, texts


@pytest.fixture
def nan_model(data_dir: Path, tmp_path: Path) -> int:
    path = model_factory.save(model_factory.make_fp16_wrong_model(), tmp_path / "nan.onnx")
    return add_model(path, "fp16-nan").id


def test_jobs_and_compare_show_wrong_outputs_and_compare_ranks_only_ok_rows(
    nan_model: int,
) -> None:
    job = run_sweep(nan_model, SweepSpec(precisions=(Precision.FP32, Precision.FP16)))
    at = open_page("jobs", job=job.id)
    assert not at.exception
    configs = next(d.value for d in at.dataframe if "configuration" in d.value.columns)
    assert list(configs["status"]) == ["ok", "wrong outputs"]
    assert "of GPU peak" not in configs.columns  # a CPU sweep: no column of dashes
    why = configs["why / error"].iloc[1]
    assert why.startswith("Outputs are wrong: 8 NaN values of 8")
    # the cell cuts a sentence this long; below the table it is whole, opened as the row failed
    [full] = [e for e in at.expander if e.label.startswith("Why / error in full")]
    assert full.proto.expanded and len(why) > 60
    assert any(plain(why) in m.value for m in full.markdown)

    at = open_page("compare", jobs=job.id)
    assert not at.exception
    table = next(d.value for d in at.dataframe if "speedup" in d.value.columns)
    assert list(table["status"]) == ["ok"]  # the wrong row is not among the compared ones
    wrong = next(d.value for d in at.dataframe if "cosine_similarity" in d.value.columns)
    assert list(wrong["status"]) == ["wrong outputs"] and wrong["cosine_similarity"].iloc[0] == 0
    assert "1 measured configuration in 1 series" in texts(at)

    # picked by hand, the wrong row is listed but is no speedup and no Pareto point
    at.toggle(key="url_all").set_value(False).run()
    every = [r.id for r in jobs.stored_results(job.id)]
    at.multiselect(key="url_configs").set_value(every).run()
    table = next(d.value for d in at.dataframe if "speedup" in d.value.columns)
    picked = table.set_index("status")
    assert picked.loc["wrong outputs", "speedup"] != picked.loc["wrong outputs", "speedup"]  # NaN
    firm = picked["stable"].ne(False) & picked["speedup_firm"]  # a busy host may leave none
    assert not picked.loc["wrong outputs", "pareto"]
    assert picked.loc["ok", "pareto"] == firm.loc["ok"]


def test_optimize_sets_the_bound_and_a_reopened_sweep_keeps_it(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    assert at.number_input(key="url_min_cosine").value == 0.9
    at.number_input(key="url_min_cosine").set_value(0.5).run()
    at.button(key="submit_sweep").click().run()
    assert not at.exception
    [job] = jobs.list_jobs()
    assert jobs.spec_of(job).min_cosine == 0.5
    reopened = open_page("optimize", model=model.id, **jobs.spec_to_query(jobs.spec_of(job)))
    assert reopened.number_input(key="url_min_cosine").value == 0.5


def test_the_jobs_page_states_the_knee_search_answer(nan_model: int) -> None:
    spec = SweepSpec(precisions=(Precision.FP32, Precision.FP16), find_knee=True, knee_max_batch=2)
    job = run_sweep(nan_model, spec)
    at = open_page("jobs", job=job.id)
    assert not at.exception
    page = texts(at).replace("\\", "")  # as read: Markdown escapes dropped
    assert "**Knee**" in page and "CPU FP32: no knee up to batch 2: throughput" in page
    assert (
        "CPU FP16: no knee: no batch ran; the search ended because batch 1 computed wrong" in page
    )
