"""Real headless Chromium and small loopback web servers, shared by the browser tests.

Every browser test launches Debian's Chromium the same way (CHROMIUM with CHROMIUM_ARGS, through
Playwright); the viewer tests also serve a folder (the pinned Netron and a model or two) from a
real HTTP server on loopback, as the dashboard serves them from its static folder.
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

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
# Playwright's own --disable-features list (1.65), which a second such switch would replace: it is
# left out of the defaults and passed again with ours added. tests/e2e/test_chromium_flags.py
# checks that the browser still disables every feature Playwright's defaults do.
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync,DestroyProfileOnBrowserClose,HttpsUpgrades,"
    "HttpsFirstBalancedModeAutoEnable,LensOverlay,MediaRouter,PaintHolding,"
    "ThirdPartyStoragePartitioning,AvoidCorsURLLoaderRestartOnRedirect,TcpPortRandomizationWin,"
    "OptimizationHints,NetworkTimeServiceQuerying,AimEnabled,PreconnectToSearch,"
    "msForceBrowserSignIn,msEdgeUpdateLaunchServicesPreferredVersion"
)
# Chromium 156 preloads its WebUI omnibox popup in a renderer of its own for every window, a new
# one per browser context: about 0.5 s of CPU each, in a headless browser that has no omnibox.
UNUSED_FEATURES = "WebUIOmniboxPopup,WebUIOmniboxAimPopup"


@contextmanager
def chromium(*extra_args: str) -> Iterator[Any]:
    """A launched headless Chromium (a Playwright Browser), closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        features = f"{PLAYWRIGHT_DISABLED_FEATURES},{UNUSED_FEATURES}"
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[*CHROMIUM_ARGS, f"--disable-features={features}", *extra_args],
            ignore_default_args=[f"--disable-features={PLAYWRIGHT_DISABLED_FEATURES}"],
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
