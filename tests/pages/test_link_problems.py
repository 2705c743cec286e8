"""Links that name something this dashboard cannot show: each view says, in one sentence, what
was wrong and what it shows instead, and never shows another object silently (the new-user
walkthrough: model=999 opened model 1, job=abc job 7, compare?jobs=3 a bare "Pick a job")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from streamlit.testing.v1 import AppTest

from backend.auth import links
from backend.jobs.regressspec import RegressionSpec, submit_regression
from backend.specs import SweepSpec
from pages.components.formatting import plain
from tests import runtime_envs
from tests.pages.seed import add_job, add_model, finished_sweep, open_page, queued_study, texts


def said(sentence: str, at: AppTest) -> bool:
    """The sentence is on the page, as plain() writes it (Markdown escaped)."""
    return plain(sentence) in texts(at)


def test_a_link_to_a_missing_model_or_graph_says_which_model_is_shown_instead(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path, "mlp")
    shown = f"showing mlp (#{model.id}, onnx) instead."
    for page in ("graph", "optimize"):
        at = open_page(page, model=999)
        assert not at.exception, at.exception
        assert said(f"The link's model=999 names no model here; {shown}", at), page
    at = open_page("graph", model=model.id, artifact=999)
    assert plain("The link's artifact=999 names no graph here; showing ") in texts(at)
    at = open_page("graph", model=model.id)  # a good link says nothing of the kind
    assert "names no" not in texts(at)


def test_a_job_link_that_is_not_a_number_shows_no_other_job(data_dir: Path, mlp_path: Path) -> None:
    job = add_job(add_model(mlp_path).id, SweepSpec())
    at = open_page("jobs", job="abc")
    assert not at.exception, at.exception
    assert said(
        "The link's job='abc' is not a job number (a whole number, e.g. 7); no job is shown: "
        "click a row above to see one.",
        at,
    )
    assert "State" not in [m.label for m in at.metric]  # no job's detail in its place
    assert "State" in [m.label for m in open_page("jobs", job=job.id).metric]


def test_optimize_says_which_link_value_it_dropped_what_is_valid_and_that_the_rest_was_kept(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id, batches="-1", precisions="fp16")
    assert not at.exception, at.exception
    assert said(
        "The link's batches= holds -1, not offered for Batch sizes here (offered: 1, 2, 4, 8, "
        "16, 32, 64, 128, 256); nothing is picked for it.",
        at,
    )
    assert at.multiselect(key="url_precisions").value == ["fp16"]
    at = open_page("optimize", model=model.id, batches="abc,0", precisions="fp16")
    shown = texts(at)
    assert "invalid literal" not in shown and "reopen it" not in shown
    assert said(
        "The link's batches=abc,0 is not valid here (it should hold whole numbers separated by "
        "commas, e.g. 1,8,32); it starts at its default and the rest of the link was kept.",
        at,
    )
    assert at.multiselect(key="url_batches").value == [1]
    assert at.multiselect(key="url_precisions").value == ["fp16"]  # the rest of the link
    at = open_page("optimize", model=model.id, from_job="seven")
    assert said(
        "The link's from_job='seven' is not a job number (a whole number, e.g. 7); what you "
        "submit here is queued as a new job, not a change of one.",
        at,
    )


def test_compare_says_why_each_linked_job_is_not_compared_and_where_it_is_shown(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path, "mlp")
    sweep, _ = finished_sweep(model.id)
    study = queued_study(model.id)
    runtime_envs.set_up("ort-1.31")
    check = submit_regression(model.id, RegressionSpec(env_b="ort-1.31"))
    at = open_page("compare", jobs=f"999,abc,{study.id},{check.id}")
    assert not at.exception, at.exception
    assert said("There is no job 999: deleted, or a mistyped link.", at)
    assert said("The link's jobs= holds 'abc', not a job number.", at)
    assert said(
        f"Job {study.id} is a serving study, not a sweep: it is shown on the Serve page.", at
    )
    assert said(
        f"Job {check.id} is a regression check, not a sweep: it is shown on Compare's own view "
        "for it.",
        at,
    )
    assert "Pick at least one job above." in texts(at)
    views = {e.proto.label: (e.proto.page, e.proto.query_string) for e in at.get("page_link")}
    assert views[f"Open job {study.id} there"] == ("serve", f"study={study.id}")
    assert views[f"Open job {check.id} there"] == ("compare", f"view=regression&jobs={check.id}")
    at = open_page("compare", jobs=sweep.id)  # a good link says nothing of the kind
    assert "not a sweep" not in texts(at) and "There is no job" not in texts(at)


def test_a_tampered_read_only_link_says_its_signature_covers_only_its_jobs(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path, "mlp")
    shared, _ = finished_sweep(model.id, label="shared one")
    other, _ = finished_sweep(model.id, label="private one")
    token = links.sign((shared.id,), datetime.now(UTC) + timedelta(hours=1))
    at = open_page("compare", role=None, jobs=f"{shared.id},{other.id}", share=token)
    assert not at.exception, at.exception
    assert said(
        f"This read-only link's signature covers only job {shared.id}; job {other.id}, also in "
        "its address, is not shown.",
        at,
    )
    assert "private one" not in texts(at)
