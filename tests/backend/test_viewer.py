"""The Netron viewer copy: patched for offline use, and loud when netron changes under us."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend import viewer
from backend.models import graphread
from tests.browsing import chromium, serving_folder, skip_without_chromium, viewer_link
from tests.bwrap_calls import child_calls, logging_bwrap


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return viewer.prepare_viewer(tmp_path_factory.mktemp("static") / "netron")


def test_every_patch_applies_to_the_installed_netron(prepared: Path) -> None:
    browser = (prepared / "browser.js").read_text()
    for name in ("age", "consent", "telemetry"):
        assert re.search(rf"const {name} = async \(\) => \{{ return;", browser), name


def test_viewer_has_no_build_date_so_it_never_expires(prepared: Path) -> None:
    index = (prepared / "index.html").read_text()
    assert 'name="date"' not in index
    assert "connect-src 'self' blob: data:" in index  # telemetry cannot leave the origin


def test_viewer_copy_holds_the_whole_static_viewer_and_no_python(prepared: Path) -> None:
    for name in ("index.html", "index.js", "view.js", "onnx.js", "grapher.js", "onnx-proto.js"):
        assert (prepared / name).is_file(), name
    assert not list(prepared.glob("*.py"))


def test_a_changed_netron_fails_loudly_naming_the_patch() -> None:
    source = viewer.netron_package_dir()
    texts = {p.file: (source / p.file).read_text() for p in viewer.PATCHES}
    texts["browser.js"] = texts["browser.js"].replace("const consent = async", "const ask = async")
    with pytest.raises(viewer.ViewerPatchError, match="cookie consent"):
        viewer.apply_patches(texts)


def test_preparing_twice_is_cheap_and_keeps_the_copy(prepared: Path) -> None:
    marker = prepared / viewer.MARKER
    before = marker.stat().st_mtime_ns
    viewer.prepare_viewer(prepared)
    assert marker.stat().st_mtime_ns == before


def test_viewer_url_is_same_origin_and_names_the_file() -> None:
    url = viewer.viewer_url("/media/abc.bin", "my model.onnx")
    assert url == "/app/static/netron/index.html?url=/media/abc.bin&identifier=my%20model.onnx"


def test_content_security_policy_starts_from_default_none(prepared: Path) -> None:
    index = (prepared / "index.html").read_text()
    assert f'content="{viewer.CSP}"' in index
    assert viewer.CSP.startswith("default-src 'none';")
    script = next(d for d in viewer.CSP.split(";") if d.strip().startswith("script-src"))
    assert script.strip() == "script-src 'self'"  # no inline or eval'd script
    assert "unsafe-eval" not in viewer.CSP


def test_an_older_prepared_copy_is_refreshed(tmp_path: Path) -> None:
    target = viewer.prepare_viewer(tmp_path / "netron")
    stale = {"netron": viewer.netron_version(), "patch_version": viewer.PATCH_VERSION - 1}
    (target / viewer.MARKER).write_text(json.dumps(stale))
    (target / "index.html").write_text("old copy")
    viewer.prepare_viewer(target)
    assert viewer.CSP in (target / "index.html").read_text()


@pytest.fixture
def served_viewer(prepared: Path, mlp_path: Path, tmp_path: Path) -> Iterator[str]:
    """The prepared viewer and one model behind a real HTTP server on loopback."""
    root = tmp_path / "site"
    shutil.copytree(prepared, root / "netron")
    shutil.copy(mlp_path, root / "mlp.onnx")
    with serving_folder(root) as url:
        yield url


def test_a_large_graphs_operators_are_counted_in_a_sandboxed_child(
    mlp_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past IN_PROCESS_BYTES (set to 0 here) the Graph page's operator counts come from a child,
    as the structure's do: a variant of up to OPTIBOARD_VIEWER_MAX_MB (512) was parsed, weights
    and all, in the dashboard's own process until 2026-12-07."""
    in_process = viewer.op_histogram(mlp_path)
    log = logging_bwrap(tmp_path, monkeypatch)
    monkeypatch.setattr(graphread, "IN_PROCESS_BYTES", 0)

    assert viewer.op_histogram(mlp_path) == in_process
    assert in_process == {"MatMul": 2, "Add": 2, "Relu": 1, "Softmax": 1}
    (call,) = child_calls(log)  # one sandboxed child, seeing the file read-only
    assert f"--ro-bind {mlp_path} {mlp_path}" in call


@pytest.mark.e2e
def test_viewer_renders_a_model_in_chromium_without_csp_violations(served_viewer: str) -> None:
    skip_without_chromium()
    from playwright.sync_api import expect

    refused: list[str] = []
    with chromium() as browser:
        page = browser.new_page()
        # netron replaces window.eval, so violations come back through the console instead.
        page.add_init_script(
            "document.addEventListener('securitypolicyviolation', e => console.warn("
            "'csp-violation ' + e.violatedDirective + ' ' + e.blockedURI));"
        )
        page.on(
            "console",
            lambda m: (
                refused.append(m.text)
                if "csp-violation" in m.text or "Content Security Policy" in m.text
                else None
            ),
        )
        page.goto(viewer_link(served_viewer, "mlp.onnx"))
        expect(page.locator("svg g.node").first).to_be_visible(timeout=60_000)
        assert page.locator("svg g.node").count() >= 6
        page.wait_for_timeout(1000)  # late violations (fonts, workers) are reported async
    assert refused == [], sorted({r[:150] for r in refused})
