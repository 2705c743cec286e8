"""One-click mixed-precision search from the Jobs page, where INT8 is explained: editors start
it, viewers cannot; its steps land as configurations of the new job and join Compare's chart."""

from __future__ import annotations

from pathlib import Path

from backend.queue import jobs
from backend.specs import MeasureSettings, Precision, SweepSpec
from tests.evidence_models import BAD_LAYER, make_bad_layer_mlp
from tests.models import save
from tests.pages.seed import add_model, open_page, run_queued, run_sweep

# two accuracy samples: the bound is checked on more than one row
MEASURE = MeasureSettings(
    warmup_runs=2, window_runs=10, window_min_seconds=0.05, max_seconds=2, accuracy_samples=2
)


def test_an_editor_starts_a_search_whose_steps_land_in_a_new_job_and_on_compare(
    data_dir: Path, tmp_path: Path
) -> None:
    model = add_model(save(make_bad_layer_mlp(), tmp_path / "bad.onnx"))
    spec = SweepSpec(precisions=(Precision.FP32, Precision.INT8_STATIC), measure=MEASURE)
    job = run_sweep(model.id, spec)

    viewer = open_page("jobs", role="viewer", job=job.id)
    assert not viewer.exception
    assert viewer.button(key=f"search_{job.id}").disabled
    said = "Your role (viewer) cannot start a mixed-precision search; editors and admins can."
    assert said in [c.value for c in viewer.caption]  # beside the greyed-out button

    at = open_page("jobs", role="editor", job=job.id)
    at.selectbox(key=f"search_metric_{job.id}").select("cosine")
    at.number_input(key=f"search_min_{job.id}").set_value(0.99)
    at.button(key=f"search_{job.id}").click().run()
    assert not at.exception
    search = jobs.list_jobs()[0]
    assert search.id != job.id and jobs.spec_of(search).search_bound == "cosine=0.99"
    assert any(f"Queued job {search.id}" in s.value for s in at.success)

    run_queued()
    page = open_page("jobs", job=search.id)
    assert not page.exception
    rows = next(d.value for d in page.dataframe if "configuration" in d.value.columns)
    steps = rows[rows["configuration"].str.contains("mixed")]
    assert len(steps) >= 1 and (steps["status"] == "ok").all()
    assert any(BAD_LAYER in key for key in steps["key"])
    assert "Mixed-precision search step" in steps["why / error"].iloc[0]
    # no second search offered from a search job
    assert not [b for b in page.button if b.key == f"search_{search.id}"]

    compare = open_page("compare", jobs=search.id)
    assert not compare.exception
    table = compare.dataframe[0].value
    assert table["label"].str.contains("mixed").any()
    assert "pareto" in table.columns
