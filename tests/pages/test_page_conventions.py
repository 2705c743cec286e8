"""What every page keeps to: a missing table value reads "–", never "None"; no Streamlit
parameter past its removal date; a download button reruns nothing, so a second download works
whatever order they are clicked in; the copy link says who can open it."""

from __future__ import annotations

import ast
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.auth import links
from backend.specs import SweepSpec
from pages.components.formatting import EMPTY
from tests.pages.seed import ROOT, add_job, add_model, finished_sweep, open_page


def _dataframe_calls_without_placeholder() -> list[str]:
    """Every st.dataframe call in pages/ and app.py that leaves Streamlit's "None" in place."""
    found = []
    for path in [ROOT / "app.py", *sorted((ROOT / "pages").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "dataframe"
                and not any(k.arg == "placeholder" for k in node.keywords)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_table_of_the_pages_shows_a_missing_value_as_a_dash() -> None:
    assert _dataframe_calls_without_placeholder() == []


def _placeholders(at: AppTest) -> list[str]:
    return [d.proto.placeholder for d in at.dataframe]


def test_jobs_and_compare_tables_show_empty_cells_as_a_dash(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, batch_sizes=(1,))
    add_job(model.id, SweepSpec(batch_sizes=(1,)))  # queued: its figures are all missing
    jobs_page = open_page("jobs")
    assert not jobs_page.exception, jobs_page.exception
    configs = next(d for d in jobs_page.dataframe if "configuration" in d.value.columns)
    assert configs.value["p50 ms"].isna().all()  # the cells the walkthrough saw as "None"
    compare = open_page("compare", jobs=job.id)
    assert not compare.exception, compare.exception
    for at in (jobs_page, compare):
        assert _placeholders(at) and set(_placeholders(at)) == {EMPTY}


class _Kept(logging.Handler):
    """The messages of a logger, as its console shows them."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("page", ["compatibility", "users"])
def test_pages_use_no_streamlit_parameter_past_its_removal(
    data_dir: Path, mlp_path: Path, page: str
) -> None:
    """Streamlit logs "Please replace `use_container_width` with `width`" on every run that
    passes it (its removal date, 2025-12-31, has passed)."""
    model = add_model(mlp_path, "mlp")
    kept = _Kept()
    streamlit_log = logging.getLogger("streamlit.deprecation_util")
    streamlit_log.addHandler(kept)
    try:
        at = open_page(page, model=model.id, op="Gemm", backend="ort-cpu")
    finally:
        streamlit_log.removeHandler(kept)
    assert not at.exception, at.exception
    assert at.dataframe  # the tables that passed use_container_width were drawn
    assert [m for m in kept.messages if "will be removed" in m] == []


def _downloads(at: AppTest) -> list[tuple[str, bool]]:
    """Each download button's label and whether a click on it leaves the app as it is."""
    return [(b.proto.label, b.proto.ignore_rerun) for b in at.get("download_button")]


def test_no_download_reruns_the_page_so_each_keeps_its_file(data_dir: Path, mlp_path: Path) -> None:
    """A rerun gives a deferred download (Compare's HTML report, the Models page's artifacts) a
    new file id and drops the old one: clicking it just after another download failed with
    "Deferred file ... not found". A click that reruns nothing keeps every button's file."""
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, batch_sizes=(1,))
    compare = open_page("compare", jobs=job.id)
    report = next(b for b in compare.get("download_button") if b.proto.label == "HTML report")
    assert report.proto.deferred_file_id  # made on click, from the view on screen
    assert _downloads(compare) == [("CSV", True), ("JSON", True), ("HTML report", True)]
    models = open_page("models", model=model.id)  # the upload and the sweep's INT8 model
    assert len(_downloads(models)) >= 2 and all(quiet for _, quiet in _downloads(models))
    compat = open_page("compatibility", model=model.id)
    assert _downloads(compat) == [("Download CSV", True), ("Download JSON", True)]


def _copy_link_sentence(at: AppTest) -> str:
    return next(c.value for c in at.caption if "link" in c.value and "sees" in c.value)


def test_the_copy_link_says_who_can_open_it(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = add_model(mlp_path, "mlp")
    job, _ = finished_sweep(model.id, batch_sizes=(1,))
    monkeypatch.setenv("OPTIBOARD_AUTH", "on")
    signed_in = _copy_link_sentence(open_page("jobs"))
    assert "signs in first" in signed_in and "Anyone" not in signed_in
    token = links.sign((job.id,), datetime.now(UTC) + timedelta(hours=1))
    shared = open_page("compare", role=None, jobs=job.id, share=token)
    assert "anyone with it sees these jobs until that link expires" in _copy_link_sentence(shared)
    monkeypatch.setenv("OPTIBOARD_AUTH", "off")
    open_dashboard = _copy_link_sentence(open_page("jobs", role=None))
    assert open_dashboard.startswith("Anyone who can reach this dashboard")
