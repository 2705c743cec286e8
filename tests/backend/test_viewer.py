"""The Netron viewer copy: patched for offline use, and loud when netron changes under us."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from backend import viewer


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
