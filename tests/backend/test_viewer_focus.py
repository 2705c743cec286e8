"""The viewer's node= parameter (backend/viewer.py patch): a link from a profile's hottest node
opens Netron with that node selected, in real Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backend import viewer
from tests.browsing import CHROMIUM, MISSING, chromium, serving_folder, viewer_link
from tests.evidence_models import BAD_LAYER, make_bad_layer_mlp
from tests.models import make_mlp, make_unnamed_if, save


def test_focus_keys_name_unnamed_nodes_by_their_first_output(tmp_path: Path) -> None:
    keys = viewer.focus_keys(save(make_mlp(), tmp_path / "mlp.onnx"))
    assert keys["Relu_2"] == "h2"  # the profile's name for the unnamed Relu -> its output
    named = viewer.focus_keys(save(make_bad_layer_mlp(), tmp_path / "bad.onnx"))
    assert named[BAD_LAYER] == BAD_LAYER


def test_viewer_url_carries_the_node_to_focus() -> None:
    url = viewer.viewer_url("/media/a.bin", "m.onnx", node="dense/1")
    assert url.endswith("&identifier=m.onnx&node=dense%2F1")
    assert "node=" not in viewer.viewer_url("/media/a.bin", "m.onnx")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "site"
    viewer.prepare_viewer(root / "netron")
    save(make_mlp(), root / "mlp.onnx")
    save(make_bad_layer_mlp(), root / "bad.onnx")
    save(make_unnamed_if(), root / "unnamed_if.onnx")
    with serving_folder(root) as url:
        yield url


@pytest.mark.e2e
def test_netron_selects_the_node_named_in_the_link(site: str) -> None:
    assert CHROMIUM.exists(), MISSING
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page()
        for model, node, op in (
            ("bad.onnx", BAD_LAYER, "MatMul"),
            ("mlp.onnx", "h2", "Relu"),
            # what the Graph page hands Netron for Relu_3, and for Sigmoid_1 in If_2's else_branch
            ("unnamed_if.onnx", "r", "Relu"),
            ("unnamed_if.onnx", "y", "If"),
        ):
            page.goto(viewer_link(site, model, node=node))
            expect(page.locator("body")).to_have_attribute(
                "data-optiboard-focused", node, timeout=60_000
            )
            selected = page.locator("svg g.node.select")
            assert selected.count() == 1
            assert op in selected.first.text_content()
