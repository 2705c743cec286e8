"""AppTest runs through app.py, as a running server's do (used by the page tests' conftest and by
bench/hostile_web_cases.py, which runs AppTest outside pytest)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from streamlit.components.v2 import manifest_scanner
from streamlit.runtime.pages_manager import PagesManager

_real_scan = manifest_scanner.scan_component_manifests
_scanned: list[Any] = []  # the one scan of this process, as a server makes it at startup


def _scan_once(max_workers: int | None = None) -> list[Any]:
    """Installed components, scanned once per process: a server scans at startup, while each new
    AppTest read every installed distribution's metadata again (2% of a test run's CPU)."""
    if not _scanned:
        _scanned.append(_real_scan(max_workers))
    return _scanned[0]


@contextmanager
def through_app_py() -> Iterator[None]:
    """Leave Streamlit's legacy pages/ mode that AppTest re-enters on each run.

    AppTest resets PagesManager.uses_pages_directory before every run, and a pages/ folder beside
    app.py turns it on, so a run would execute pages/<page>.py without app.py (no router, no
    sign-in gate) and a click would be spent on that run. A server leaves the mode for good once
    app.py has called st.navigation; this does the same from the first run. And as a server
    scans the installed components once at startup, the process scans them once (_scan_once).
    """
    original = PagesManager.__init__

    def init(self: PagesManager, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    PagesManager.__init__ = init  # type: ignore[method-assign]
    manifest_scanner.scan_component_manifests = _scan_once
    try:
        yield
    finally:
        PagesManager.__init__ = original  # type: ignore[method-assign]
        manifest_scanner.scan_component_manifests = _real_scan
