"""The dashboard in a real headless Chromium, against a real `streamlit run` and a real worker.

Upload a model through the file input, submit FP32 + INT8 static, watch Compare fill in, open
the page's shared link in a fresh browser context, see Netron draw the graph, upload a CNN as a
PyTorch .pt2 file (its conversion check and dynamic dimension show on the Models page; an
encoder's two dimensions are the CLI's test, tests/backend/models/test_pt2.py) and sweep the
converted CNN from Optimize until Compare shows it. Screenshots land in test-artifacts/ for a
person to look at.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import models as model_factory
from tests import torch_models
from tests.browsing import chromium, skip_without_chromium
from tests.dashboard import ARTIFACTS, app_and_worker

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[str]:
    """A real server and a real worker sharing one fresh data directory."""
    skip_without_chromium()
    with app_and_worker(tmp_path / "data", tmp_path / "logs", "e2e-") as url:
        yield url


def _legend(page) -> set[str]:  # noqa: ANN001 - playwright Page
    """The legends' texts, read in one go: a chart that redraws between reads of single
    entries would leave a locator waiting for an entry that is gone."""
    return set(page.locator(".js-plotly-plot .legendtext").all_text_contents())


def _wait_for(page, predicate, timeout: float, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(1.0)
    page.screenshot(path=str(ARTIFACTS / "e2e-timeout.png"), full_page=True)
    raise AssertionError(f"timed out waiting for {what}")


# Streamlit marks its app root with the script's state. A click that reached the server starts a
# run within seconds; one sent while the websocket was down never does. Counted by an observer on
# the whole document (it outlives a re-mounted root), reset before each click.
_COUNT_RUNS = """() => {
    window.__optiboardRuns = 0;
    if (window.__optiboardWatching) return;
    window.__optiboardWatching = true;
    new MutationObserver(changes => {
        for (const change of changes) {
            if (change.target.getAttribute('data-test-script-state') === 'running') {
                window.__optiboardRuns++;
            }
        }
    }).observe(document.body, {
        subtree: true, attributes: true, attributeFilter: ['data-test-script-state'],
    });
}"""
RUN_START_S = 15  # far above a run's start under CI's load, far below the 60 s outcome wait


def _add_to_library(page, path: Path, added: str) -> None:  # noqa: ANN001
    """Choose the file and click "Add to library" until the upload's run has started (its
    spinner or its outcome shows), at most three times. Under CI's load the page's websocket can
    drop and reconnect; a click sent meanwhile is lost (Streamlit does not resend it), as once
    seen in CI, so a person chooses the file again (a reconnected session has lost it) and
    clicks again, as this does. A click is taken as lost only when no script run started within
    RUN_START_S of it: one that started a run is never repeated, which could upload twice."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    file_name = path.name
    started = page.get_by_text(re.compile(rf"Ingesting {re.escape(file_name)}|{re.escape(added)}"))
    console: list[str] = []  # the page's own messages (a dropped websocket says so there)

    def heard(message) -> None:  # noqa: ANN001 - playwright ConsoleMessage
        console.append(f"{message.type}: {message.text}")

    page.on("console", heard)
    try:
        for attempt in range(3):
            chooser = page.locator("input[type=file]").first
            if attempt:  # the same file again: the input changes only when emptied first
                chooser.set_input_files([])
            chooser.set_input_files(str(path))
            expect(page.get_by_text(file_name).first).to_be_visible(timeout=30_000)
            clicked = time.strftime("%H:%M:%S")
            page.evaluate(_COUNT_RUNS)
            page.get_by_role("button", name="Add to library").click()
            try:
                page.wait_for_function(
                    "() => window.__optiboardRuns > 0", timeout=RUN_START_S * 1000
                )
            except PlaywrightTimeout:  # lost: no run started
                page.screenshot(path=str(ARTIFACTS / "e2e-click-lost.png"), full_page=True)
                with open(ARTIFACTS / "e2e-click-lost.log", "a") as log:
                    log.write(f"click {attempt + 1} on {file_name} at {clicked} started no run:\n")
                    log.writelines(line + "\n" for line in console)
                console.clear()  # the next attempt's lines only
                continue
            expect(started.first).to_be_visible(timeout=60_000)  # the run the click started
            return
    finally:
        page.remove_listener("console", heard)
    raise AssertionError(f"three clicks on Add to library never started {file_name}'s upload")


def test_upload_sweep_compare_share_and_graph_in_a_real_browser(
    dashboard: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(exist_ok=True)
    model_file = model_factory.save(model_factory.make_mlp(), tmp_path / "mlp.onnx")
    cnn_pt2 = torch_models.save_cnn_pt2(tmp_path / "cnn.pt2")
    external: list[str] = []
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1600, "height": 1100})
        page = context.new_page()
        page.on(
            "request",
            lambda r: external.append(r.url) if not r.url.startswith(dashboard) else None,
        )

        # 1. Upload through the browser's file input.
        page.goto(f"{dashboard}/models")
        expect(page.get_by_text("The library is empty")).to_be_visible(timeout=60_000)
        # a first visit straight to a page URL still goes through app.py's router and sidebar
        expect(page.get_by_text("Access control is off")).to_be_visible(timeout=30_000)
        _add_to_library(page, model_file, "Added mlp")
        expect(page.get_by_text("Added mlp")).to_be_visible(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "e2e-1-models.png"), full_page=True)

        # 2. Submit FP32 + INT8 static (the defaults) with the quick measurement preset.
        page.goto(f"{dashboard}/optimize?model=1&measure=quick")
        submit = page.get_by_role("button", name=re.compile(r"Submit sweep \(2\)"))
        expect(submit).to_be_visible(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "e2e-2-optimize.png"), full_page=True)
        submit.click()
        expect(page.get_by_text("Queued job 1 with 2 configurations")).to_be_visible(timeout=30_000)

        # 3. Compare fills in by itself as the worker measures.
        page.goto(f"{dashboard}/compare?jobs=1")
        wanted = {"#1 mlp CPU FP32", "#1 mlp CPU INT8 static (QDQ)"}
        _wait_for(page, lambda: wanted <= _legend(page), 180, "both configurations on the chart")
        page.screenshot(path=str(ARTIFACTS / "e2e-3-compare.png"), full_page=True)

        # 4. The page's shared link shows the same configurations in a fresh browser.
        page.get_by_role("button", name=re.compile("Copy link")).click()
        link = page.locator("[data-testid=stPopoverBody] code").first.inner_text().strip()
        assert link.startswith(dashboard) and "jobs=1" in link
        fresh = browser.new_context(viewport={"width": 1600, "height": 1100}).new_page()
        fresh.goto(link)
        _wait_for(fresh, lambda: wanted <= _legend(fresh), 60, "the shared view's configurations")
        # every chart of the view draws there too, the Pareto front's included; charts draw one
        # after another, so the legends are compared until they agree, not at the first look
        _wait_for(fresh, lambda: _legend(fresh) == _legend(page), 60, "the same chart legends")
        fresh.screenshot(path=str(ARTIFACTS / "e2e-4-shared-link.png"), full_page=True)

        # 5. Netron draws the graph inside the page, from the dashboard's own origin.
        page.goto(f"{dashboard}/graph?model=1")
        viewer = page.frame_locator("iframe[title='Netron graph of mlp']")
        expect(viewer.locator("svg g.node").first).to_be_visible(timeout=60_000)
        assert viewer.locator("svg g.node").count() >= 6
        expect(viewer.get_by_text("Accept")).to_have_count(0)  # no consent dialog
        page.screenshot(path=str(ARTIFACTS / "e2e-5-graph.png"), full_page=True)

        # 6. A PyTorch ExportedProgram (.pt2) uploads the same way, converted and checked.
        page.goto(f"{dashboard}/models")
        page.get_by_text("Upload a model").first.click()
        _add_to_library(page, cnn_pt2, "Added cnn")
        expect(page.get_by_text("Added cnn (pytorch-exported")).to_be_visible(timeout=180_000)
        expect(page.get_by_text("Checked against the ExportedProgram")).to_be_visible()
        expect(page.get_by_text("Dynamic dimensions: x_dim0 (1..32).")).to_be_visible()
        # the model picker moved to the new upload (it kept showing the previous model before)
        picker = page.get_by_role("combobox", name="Model")
        expect(picker).to_match_aria_snapshot('- combobox "Model": /cnn \\(#2, pytorch/')
        page.screenshot(path=str(ARTIFACTS / "e2e-6-pt2.png"), full_page=True)

        # 7. The converted CNN (model 2) sweeps like an ONNX upload: one FP32 configuration at
        # batch 1 with the quick preset, submitted from Optimize and measured by the worker.
        page.goto(f"{dashboard}/optimize?model=2&precisions=fp32&batches=1&measure=quick")
        submit = page.get_by_role("button", name=re.compile(r"Submit sweep \(1\)"))
        expect(submit).to_be_visible(timeout=60_000)
        submit.click()
        expect(page.get_by_text("Queued job 2 with 1 configuration")).to_be_visible(timeout=30_000)
        page.goto(f"{dashboard}/compare?jobs=2")
        _wait_for(page, lambda: "#2 cnn CPU FP32" in _legend(page), 180, "the .pt2 sweep's row")
        page.screenshot(path=str(ARTIFACTS / "e2e-8-pt2-compare.png"), full_page=True)

        # 8. At 1100 px (a laptop with the sidebar open) no label, metric or link is cut with an
        # ellipsis: "Copy link" read "Cop...", a job's state "succee...", its worker "vm-220..."
        page.set_viewport_size({"width": 1100, "height": 1400})
        for path in ("jobs?job=1", "compare?jobs=1", "models?model=1"):
            page.goto(f"{dashboard}/{path}")
            page.wait_for_selector("[data-test-script-state=notRunning]", timeout=60_000)
            page.wait_for_timeout(1500)  # let the last deltas paint
            page.screenshot(path=str(ARTIFACTS / f"e2e-9-narrow-{path.split('?')[0]}.png"))
            assert page.evaluate(_CUT) == [], path
    assert external == [], f"the dashboard reached outside its origin: {external}"


# Text the page shows in one line, ellipsised when its box is narrower: metric values, widget
# labels, buttons (the popover's "Copy link" among them) and page links.
_CUT = """() => [...document.querySelectorAll(
    '[data-testid=stMetricValue] div, [data-testid=stWidgetLabel] p, '
    + '[data-testid=stPopover] button p, [data-testid=stPageLink] p, button p'
)].filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""
