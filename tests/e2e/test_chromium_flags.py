"""The browser the e2e tests launch (tests/browsing.chromium): Playwright's own disabled features
kept while ours are added, and no renderer spent on Chromium's omnibox popup."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.browsing import CHROMIUM, UNUSED_FEATURES, chromium


def _opened(browser: Any) -> tuple[set[str], list[str]]:
    """With one page open in a window of its own: the features the browser hands its renderers
    as disabled (their command lines carry its effective list; only this process's descendants
    are read) and the browser-UI pages it runs beside it."""
    page = browser.new_page()
    page.set_content("<p>ready</p>")
    found: set[str] = set()
    for pid in _descendants(os.getpid()):
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            args = line.replace("\0", " ").split()  # Chromium rewrites its argv as one string
        except OSError:  # ended meanwhile
            continue
        if "--type=renderer" in args:
            for arg in args:
                if arg.startswith("--disable-features="):
                    found |= set(arg.removeprefix("--disable-features=").split(","))
    session = browser.new_browser_cdp_session()
    targets = session.send("Target.getTargets")["targetInfos"]
    session.detach()
    page.close()
    return found, [t["url"] for t in targets if t["type"] == "browser_ui"]


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found += children.get(pid, [])
        todo += children.get(pid, [])
    return found


def test_playwrights_disabled_features_stay_disabled_beside_ours() -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:  # Playwright's defaults alone, on the same binary
        plain = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            defaults, plain_ui = _opened(plain)
        finally:
            plain.close()
    with chromium() as browser:
        ours, ui = _opened(browser)
    assert defaults, "no renderer's command line named its disabled features"
    assert defaults - ours == set(), "update tests/browsing.PLAYWRIGHT_DISABLED_FEATURES"
    assert set(UNUSED_FEATURES.split(",")) <= ours
    assert any("omnibox-popup" in url for url in plain_ui), plain_ui  # what the flags are for
    assert ui == []
