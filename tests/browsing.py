"""Real headless Chromium and small loopback web servers, shared by the browser tests.

Every browser test launches Debian's headless Chromium the same way (CHROMIUM with CHROMIUM_ARGS,
through Playwright); the viewer tests also serve a folder (the pinned Netron and a model or two)
from a real HTTP server on loopback, as the dashboard serves them from its static folder.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from backend import viewer

# Debian's package of Chromium's headless shell: the same Blink and V8 as its `chromium` (one
# source package, one version), without the desktop browser's UI, which Playwright itself runs
# for headless pages. A browser module took about 16% less CPU on it than on `chromium --headless`.
CHROMIUM = Path("/usr/bin/chromium-headless-shell")
MISSING = "Debian's chromium-headless-shell is not installed (scripts/test installs it)"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def skip_without_chromium() -> None:
    """Skip the calling test or fixture where the browser is not installed."""
    import pytest  # here: bench/graph_overlay.py imports this module without pytest at work

    if not CHROMIUM.exists():
        pytest.skip(MISSING)


@contextmanager
def chromium(*extra_args: str) -> Iterator[Any]:
    """A launched headless Chromium (a Playwright Browser), closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, *extra_args]
        )
        try:
            yield browser
        finally:
            browser.close()


class QuietHandler(SimpleHTTPRequestHandler):
    """A folder's files, without a log line per request."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass


@contextmanager
def serving(handler: Callable[..., BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on a free loopback port answering with `handler`; its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def serving_folder(root: Path) -> AbstractContextManager[str]:
    """The files under `root` behind a real HTTP server (serving with a QuietHandler)."""
    return serving(functools.partial(QuietHandler, directory=str(root)))


def viewer_link(site: str, model: str, node: str | None = None) -> str:
    """The viewer's link to /model as the dashboard writes it, on a site serving the viewer at
    /netron (the dashboard serves it under /app/static)."""
    return site + viewer.viewer_url(f"/{model}", model, node=node).replace("/app/static", "")
