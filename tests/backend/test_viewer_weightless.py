"""The Graph page's weightless copy (backend/graphview/skeleton.py) in the pinned Netron, in real
Chromium: the graph draws, a stripped weight keeps its type and shape and reads 'Tensor data is
empty.', and the viewer asks for no other file (an external-data reference to a file that is not
served would make it request one and get a 404)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backend import viewer
from backend.graphview.skeleton import strip_weights
from tests.browsing import CHROMIUM, MISSING, chromium, serving_folder, viewer_link
from tests.models import make_mlp, save


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "site"
    viewer.prepare_viewer(root / "netron")
    model = make_mlp(features=512, hidden=1024)
    assert strip_weights(model) == 3  # w1 (2 MB), b1 (4 kB), w2 (40 kB); b2 (40 B) is kept
    save(model, root / "weightless.onnx")
    with serving_folder(root) as url:
        yield url


@pytest.mark.e2e
def test_netron_draws_the_weightless_copy_with_shapes_and_requests_no_weights(site: str) -> None:
    assert CHROMIUM.exists(), MISSING
    from playwright.sync_api import expect

    failed: list[str] = []
    with chromium() as browser:
        page = browser.new_page()
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        page.goto(viewer_link(site, "weightless.onnx", node="h0"))
        expect(page.locator("body")).to_have_attribute("data-optiboard-focused", "h0")
        page.locator("svg g.node", has_text="MatMul").first.click()  # opens its properties
        weight = page.locator("#sidebar .sidebar-item-value", has_text="w1").last
        weight.locator(".sidebar-item-value-expander").click()
        expect(weight).to_contain_text("float32[512,1024]")
        expect(weight).to_contain_text("Tensor data is empty.")
    assert failed == []
