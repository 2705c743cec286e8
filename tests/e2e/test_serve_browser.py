"""The Serve page in a real headless Chromium: a serving study the real worker measured on a real
Triton server, drawn by a real `streamlit run`, and its shared link reopened in a fresh browser.
The screenshot lands in test-artifacts/ for a person to look at."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from backend.models.ingest import ingest_file
from tests import models as model_factory
from tests.browsing import chromium
from tests.e2e.test_browser import (
    ARTIFACTS,
    _legend,
    _wait_for,
    dashboard,  # noqa: F401 - the fixture
)
from tests.pages.seed import queued_study

pytestmark = pytest.mark.e2e


def test_serve_page_draws_a_measured_study_and_its_link_reopens_it(
    dashboard: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPTIBOARD_DATA_DIR", str(tmp_path / "data"))  # the dashboard's own
    monkeypatch.delenv("OPTIBOARD_DATABASE_URL", raising=False)
    model_file = model_factory.save(model_factory.make_mlp(), tmp_path / "mlp.onnx")
    model = ingest_file(model_file, "mlp.onnx")
    job = queued_study(model.id, slo_p99_ms=20.0)  # the dashboard's worker runs it on Triton
    ARTIFACTS.mkdir(exist_ok=True)
    wanted = re.compile(r"\((measured|predicted)\)$")
    with chromium() as browser:
        # tall enough for the whole page: Streamlit scrolls inside its own container
        page = browser.new_context(viewport={"width": 1500, "height": 2300}).new_page()
        page.goto(f"{dashboard}/serve?view=measured&study={job.id}")

        def both() -> set[str]:
            return {re.search(wanted, n).group(1) for n in _legend(page) if re.search(wanted, n)}

        _wait_for(page, lambda: both() == {"measured", "predicted"}, 90, "measured + predicted")
        _wait_for(
            page,
            lambda: page.get_by_text("2 of 2 load points measured").count() > 0,
            30,
            "every point",
        )
        page.screenshot(path=str(ARTIFACTS / "e2e-serve.png"), full_page=True)
        page.get_by_role("button", name=re.compile("Copy link")).click()
        link = page.locator("[data-testid=stPopoverBody] code").first.inner_text().strip()
        assert f"study={job.id}" in link and "view=measured" in link and "slo=20" in link
        fresh = browser.new_context(viewport={"width": 1500, "height": 1300}).new_page()
        fresh.goto(link)
        _wait_for(fresh, lambda: _legend(fresh) == _legend(page), 60, "the same curves")
