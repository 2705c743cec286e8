"""The Graph page's weightless copy (backend/graphview/skeleton.py) in the pinned Netron, in real
Chromium: the graph draws, a stripped weight keeps its type and shape and reads 'Tensor data is
empty.', and the viewer asks for no other file (an external-data reference to a file that is not
served would make it request one and get a 404)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from backend import viewer
from backend.graphview.skeleton import strip_weights
from tests.backend.test_viewer import QuietHandler
from tests.e2e.test_browser import CHROMIUM, CHROMIUM_ARGS
from tests.models import make_mlp, save


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "site"
    viewer.prepare_viewer(root / "netron")
    model = make_mlp(features=512, hidden=1024)
    assert strip_weights(model) == 3  # w1 (2 MB), b1 (4 kB), w2 (40 kB); b2 (40 B) is kept
    save(model, root / "weightless.onnx")
    handler = functools.partial(QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.e2e
def test_netron_draws_the_weightless_copy_with_shapes_and_requests_no_weights(site: str) -> None:
    assert CHROMIUM.exists(), "scripts/test installs Debian's chromium at /usr/bin/chromium"
    from playwright.sync_api import expect, sync_playwright

    failed: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        url = viewer.viewer_url("/weightless.onnx", "weightless.onnx", node="h0")
        page.goto(site + url.replace("/app/static", ""))
        expect(page.locator("body")).to_have_attribute("data-optiboard-focused", "h0")
        page.locator("svg g.node", has_text="MatMul").first.click()  # opens its properties
        weight = page.locator("#sidebar .sidebar-item-value", has_text="w1").last
        weight.locator(".sidebar-item-value-expander").click()
        expect(weight).to_contain_text("float32[512,1024]")
        expect(weight).to_contain_text("Tensor data is empty.")
        browser.close()
    assert failed == []
