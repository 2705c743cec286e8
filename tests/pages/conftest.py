"""Page tests: each starts with empty st.cache_data, as a fresh server would.

Every test has its own database, but ids repeat (job 1 in each), and pages cache reads by id;
without this a page could show a previous test's rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import streamlit as st


@pytest.fixture(autouse=True)
def _fresh_page_caches() -> Iterator[None]:
    st.cache_data.clear()
    yield
