"""A signed read-only link, end to end in a real Chromium against a real `streamlit run serve.py`:
an editor makes it on Compare and sees it; a visitor without an account opens it and gets that
comparison, with its settings, at its own address (not "Page not found" and a jump to `/`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import models as model_factory
from tests.browsing import chromium, skip_without_chromium
from tests.dashboard import ARTIFACTS, seeding, serve_py
from tests.e2e.test_signin import PASSWORD, _settled, _sign_in

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Dashboard:
    url: str
    job_id: int
    log: Path


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    skip_without_chromium()
    tmp = tmp_path_factory.mktemp("links")
    data_dir = tmp / "data"
    with seeding(data_dir):
        from backend.auth import accounts
        from backend.auth.cli import cli_principal
        from tests.pages.seed import add_model, finished_sweep

        # the sweep before the account: from an empty data directory it is the step test_signin
        # seeds too, so one worker run of a test run serves both (tests/pages/stored.py)
        model_path = model_factory.save(model_factory.make_mlp(), tmp / "mlp.onnx")
        job, _ = finished_sweep(add_model(model_path, "mlp").id)
        accounts.add_account(cli_principal(), "editor", "editor", PASSWORD)
    log = tmp / "streamlit.log"
    with serve_py(data_dir, log, keep_as="e2e-links-streamlit.log") as (url, _):
        yield Dashboard(url, job.id, log)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as browser:
        yield browser


def test_an_editor_makes_a_link_sees_it_and_a_visitor_opens_that_view(
    dashboard: Dashboard,
    browser,  # noqa: ANN001
) -> None:
    from playwright.sync_api import expect

    editor = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    editor.goto(f"{dashboard.url}/")  # the way an editor gets there: Home, then the sidebar
    _sign_in(editor, "editor")
    expect(editor.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
    editor.get_by_test_id("stSidebarNavLink").filter(has_text="Compare").click()
    expect(editor.get_by_role("heading", name="Compare")).to_be_visible(timeout=60_000)
    _settled(editor)
    editor.goto(f"{dashboard.url}/compare?jobs={dashboard.job_id}&charts=latency")
    expect(editor.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
    _settled(editor)
    editor.get_by_role("button", name=re.compile("Read-only link")).click()
    editor.get_by_role("button", name="Make link").click()
    made = editor.get_by_text(re.compile(r"^http://\S+share=\S+$"))
    expect(made).to_be_visible(timeout=60_000)
    _settled(editor)
    editor.keyboard.press("Escape")  # the popover closes (as the click's rerun may close it) ...
    editor.mouse.click(5, 500)
    expect(editor.get_by_role("button", name="Make link")).to_be_hidden(timeout=10_000)
    expect(made).to_be_visible()  # ... and the link is still in sight
    link = made.inner_text().strip()
    editor.screenshot(path=str(ARTIFACTS / "e2e-links-made.png"), full_page=True)
    editor.context.close()
    assert re.search(r"/compare\?", link), link

    visitor = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    visitor.goto(link)
    expect(visitor.get_by_role("heading", name="Compare")).to_be_visible(timeout=60_000)
    expect(visitor.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
    _settled(visitor)
    visitor.screenshot(path=str(ARTIFACTS / "e2e-links-opened.png"), full_page=True)
    body = visitor.inner_text("body")
    assert "Page not found" not in body and "Sign in to Optiboard" not in body
    assert re.search(r"/compare\?", visitor.url), visitor.url  # not rewritten to /
    assert "share=" in visitor.url and "charts=latency" in visitor.url
    assert visitor.locator(".js-plotly-plot").count() == 1  # only the latency chart, as linked

    visitor.goto(link.replace("/compare?", "/models?"))  # any other page of a link is Compare
    expect(visitor.get_by_role("heading", name="Compare")).to_be_visible(timeout=60_000)
    _settled(visitor)
    assert re.search(r"/compare\?", visitor.url) and "share=" in visitor.url, visitor.url
    assert visitor.get_by_role("heading", name="Models").count() == 0
    visitor.context.close()
