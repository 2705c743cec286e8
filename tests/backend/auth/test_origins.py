"""Which pages may open the dashboard's websocket: its own origin only (issue 21, item 9)."""

from __future__ import annotations

from backend.auth.origins import websocket_origin_allowed

LISTED = ["localhost", "127.0.0.1", "::1", "[::1]", "*.corp.example"]


def allowed(origin: str | None, host: str | None = "127.0.0.1:8501") -> bool:
    return websocket_origin_allowed(origin, host, LISTED, 8501)


def test_the_dashboards_own_pages_are_allowed() -> None:
    assert allowed("http://127.0.0.1:8501")
    assert allowed("http://localhost:8501")  # a listed host on the dashboard's port
    assert allowed("http://[::1]:8501")
    assert allowed("https://dash.corp.example:8501")
    assert allowed("https://dash.example.com", host="dash.example.com")  # behind a TLS proxy
    assert allowed("http://dash.example.com:80", host="dash.example.com")  # 80 is http's port
    assert allowed(None)  # a program sends no Origin; its own cookies are all it has


def test_any_other_port_scheme_or_host_is_refused() -> None:
    assert not allowed("http://127.0.0.1:9")  # another port of the same host
    assert not allowed("http://localhost:8502")
    assert not allowed("http://127.0.0.1")  # port 80
    assert not allowed("https://evil.test:8501")  # an unlisted host on the right port
    assert not allowed("http://evil.test:8501", host="127.0.0.1:8501")
    assert not allowed("https://dash.example.com:8443", host="dash.example.com")
    for odd in ("null", "file://", "ws://127.0.0.1:8501", "http://127.0.0.1:8501/x", ""):
        assert not allowed(odd), odd
    assert not allowed("http://user@127.0.0.1:8501")
    assert not allowed("http://127.0.0.1:99999")
