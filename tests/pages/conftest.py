"""Page tests run app.py on every AppTest run, as a running server does after its first request,
and each starts with empty st.cache_data, as a fresh server would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


@pytest.fixture(autouse=True)
def route_through_app_py() -> Iterator[None]:
    """Leave Streamlit's legacy pages/ mode that AppTest re-enters on each run.

    AppTest resets PagesManager.uses_pages_directory before every run, and a pages/ folder beside
    app.py turns it on, so a run would execute pages/<page>.py without app.py (no router, no
    sign-in gate) and a click would be spent on that run. A server leaves the mode for good once
    app.py has called st.navigation; this does the same from the first run.
    """
    original = PagesManager.__init__

    def init(self: PagesManager, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    PagesManager.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        PagesManager.__init__ = original  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def fresh_page_caches() -> Iterator[None]:
    """Every test has its own database but ids repeat (job 1 in each), and pages cache reads by
    id; without this a page could show a previous test's rows."""
    st.cache_data.clear()
    yield
