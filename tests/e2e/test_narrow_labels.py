"""At 1100 px (a laptop with the sidebar open) no label, metric or link of the Jobs, Compare and
Models pages is cut with an ellipsis: only a real browser lays them out. A real `streamlit run`
and worker measure one small sweep; the screenshots land in test-artifacts/."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.specs import Precision, SweepSpec
from tests import models as model_factory
from tests.browsing import chromium
from tests.e2e.test_browser import (
    ARTIFACTS,
    _wait_for,
    dashboard,  # noqa: F401 - the fixture
)
from tests.pages.seed import FAST

pytestmark = pytest.mark.e2e

# Text the page shows in one line, ellipsised when its box is narrower: metric values, widget
# labels, buttons (the popover's "Copy link" among them) and page links.
_CUT = """() => [...document.querySelectorAll(
    '[data-testid=stMetricValue] div, [data-testid=stWidgetLabel] p, '
    + '[data-testid=stPopover] button p, [data-testid=stPageLink] p, button p'
)].filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""


def test_labels_metrics_and_links_are_whole_at_1100_px(
    dashboard: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPTIBOARD_DATA_DIR", str(tmp_path / "data"))  # the dashboard's own
    monkeypatch.delenv("OPTIBOARD_DATABASE_URL", raising=False)
    model = ingest_file(model_factory.save(model_factory.make_mlp(), tmp_path / "m.onnx"), "m.onnx")
    spec = dataclasses.replace(
        SweepSpec(precisions=(Precision.FP32,), batch_sizes=(1,)), measure=FAST
    )
    job = jobs.submit_sweep(model.id, spec, label="narrow")
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1100, "height": 1400}).new_page()
        page.goto(f"{dashboard}/jobs?job={job.id}")
        _wait_for(page, lambda: page.get_by_text("Compare results").count() > 0, 90, "the job")
        for path in (f"jobs?job={job.id}", f"compare?jobs={job.id}", f"models?model={model.id}"):
            page.goto(f"{dashboard}/{path}")
            page.wait_for_selector("[data-test-script-state=notRunning]", timeout=60_000)
            page.wait_for_timeout(1500)  # let the last deltas paint
            page.screenshot(path=str(ARTIFACTS / f"e2e-narrow-{path.split('?')[0]}.png"))
            assert page.evaluate(_CUT) == [], path
