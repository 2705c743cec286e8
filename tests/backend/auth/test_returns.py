"""The view remembered across an identity provider's round trip: per browser, once, briefly."""

from __future__ import annotations

import os

from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

from backend.auth import returns


def test_a_browser_keeps_its_key_when_streamlit_masks_its_cookie_again() -> None:
    token = os.urandom(16)
    first = generate_xsrf_token_string(token, 1_700_000_000)
    again = generate_xsrf_token_string(token, 1_700_000_000)  # a fresh mask, as on each page load
    other = generate_xsrf_token_string(os.urandom(16), 1_700_000_000)

    assert first != again
    assert returns.browser_key(first) == returns.browser_key(again) is not None
    assert returns.browser_key(other) != returns.browser_key(first)
    assert returns.browser_key(None) is None
    assert returns.browser_key("not|a|cookie") is None
    assert returns.browser_key("2|zz|00|1") is None


def test_a_view_is_given_back_once_to_the_same_browser_and_not_after_it_expired() -> None:
    view = returns.Target("compare", {"jobs": ["3"], "charts": ["latency"]})
    returns.remember("browser-a", view, now=100.0)

    assert returns.take("browser-b", now=101.0) is None
    assert returns.take("browser-a", now=101.0) == view
    assert returns.take("browser-a", now=102.0) is None  # once

    returns.remember("browser-a", view, now=100.0)
    assert returns.take("browser-a", now=100.0 + returns.TTL_S) is None


def test_a_sign_in_returns_only_to_a_path_on_this_site() -> None:
    """Where a password sign-in's redirect may go (its ticket carries it): never another site."""
    for kept in ("/", "/compare?jobs=1&jobs=2&charts=latency", "/base/models?model=3"):
        assert returns.local_path(kept) == kept
    for other in (
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example/x",
        "\\\\evil.example",
        "javascript:alert(1)",
        "compare",
        "/ x",
        "/\tx",
        "",
    ):
        assert returns.local_path(other) == "/", other
