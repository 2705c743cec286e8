"""The browser the e2e tests launch (tests/browsing.chromium): Chromium's headless shell, which
spends no renderer on browser UI beside the page (the full `chromium --headless` preloads its
omnibox popup in a renderer of its own for every window, about 0.5 s of CPU each)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.browsing import chromium
from tests.processes import descendants


def _renderers() -> int:
    """Renderer processes among this process's descendants."""
    count = 0
    for pid in descendants(os.getpid()):
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        count += "--type=renderer" in line.replace("\0", " ").split()
    return count


def test_one_page_runs_in_one_renderer_with_no_browser_ui_beside_it() -> None:
    with chromium() as browser:
        page = browser.new_page()
        page.set_content("<p>ready</p>")
        assert page.inner_text("p") == "ready"
        session = browser.new_browser_cdp_session()
        targets = session.send("Target.getTargets")["targetInfos"]
        session.detach()
        assert [t["url"] for t in targets if t["type"] == "browser_ui"] == []
        assert [t["type"] for t in targets if t["type"] != "browser"] == ["page"]
        assert _renderers() == 1
