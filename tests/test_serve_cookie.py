"""serve.py's session-cookie route over real HTTP (Starlette's test client), real accounts and
real tickets: the cookie's Secure flag follows OPTIBOARD_COOKIE_SECURE, also behind a TLS proxy."""

from __future__ import annotations

from http.cookies import SimpleCookie
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

import serve
from backend.auth import accounts, returns, sessions
from backend.auth.cli import cli_principal

XSRF = "2|01020304|" + bytes(b ^ (1, 2, 3, 4)[i % 4] for i, b in enumerate(b"tok")).hex() + "|1"


def _cookie_attributes(base_url: str, headers: dict[str, str]) -> dict[str, str]:
    """Sign in through the real ticket route; the Set-Cookie attributes the browser gets."""
    app = Starlette(routes=[Route(sessions.START_PATH, serve.start, methods=["POST"])])
    browser = returns.browser_key(XSRF)
    assert browser is not None
    ticket = sessions.issue_ticket("ada", browser)
    host = base_url.split("://", 1)[1]
    with TestClient(app, base_url=base_url) as client:
        client.cookies.set(serve.XSRF_COOKIE, XSRF)
        answer = client.post(
            sessions.START_PATH,
            params={"ticket": ticket},
            headers={"origin": f"http://{host}", "host": host, **headers},
        )
    assert answer.status_code == 204, answer.text
    morsel = SimpleCookie(answer.headers["set-cookie"])[sessions.COOKIE]
    return {k: str(v) for k, v in morsel.items() if v}


@pytest.mark.parametrize(
    ("setting", "proto", "secure"),
    [
        (None, None, False),  # plain HTTP on the LAN: a Secure cookie would never come back
        (None, "https", True),  # auto: a TLS proxy says so
        ("on", None, True),  # a proxy that does not say so
        ("off", "https", False),
    ],
)
def test_the_session_cookie_is_secure_when_the_setting_or_the_proxy_says_so(
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    setting: str | None,
    proto: str | None,
    secure: bool,
) -> None:
    accounts.add_account(cli_principal(), "ada", "editor", "correct horse battery")
    if setting is not None:
        monkeypatch.setenv("OPTIBOARD_COOKIE_SECURE", setting)
    headers = {"x-forwarded-proto": proto} if proto else {}
    attributes = _cookie_attributes("http://dash.test:8501", headers)
    assert attributes["httponly"] and attributes["samesite"].lower() == "lax"
    assert bool(attributes.get("secure")) is secure, attributes


def test_a_bad_cookie_secure_value_is_refused_in_one_sentence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import settings

    monkeypatch.setenv("OPTIBOARD_COOKIE_SECURE", "yes")
    with pytest.raises(ValueError, match="takes auto, on or off"):
        settings.COOKIE_SECURE.get()
