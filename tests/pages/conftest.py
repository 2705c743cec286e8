"""Page tests run app.py on every AppTest run, as a running server does after its first request,
and each starts with empty st.cache_data, as a fresh server would."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import streamlit as st

from tests.pages.router import through_app_py


@pytest.fixture(autouse=True)
def route_through_app_py() -> Iterator[None]:
    """Every page test runs through app.py (tests/pages/router.py says why)."""
    with through_app_py():
        yield


@pytest.fixture(autouse=True)
def fresh_page_caches() -> Iterator[None]:
    """Every test has its own database but ids repeat (job 1 in each), and pages cache reads by
    id; without this a page could show a previous test's rows."""
    st.cache_data.clear()
    yield
