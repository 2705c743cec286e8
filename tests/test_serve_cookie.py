"""serve.py's session-cookie route over real HTTP (Starlette's test client), real accounts and
real tickets: the cookie's Secure flag follows OPTIBOARD_COOKIE_SECURE, also behind a TLS proxy;
the answer sends the browser back to the ticket's address, and a spent ticket gets a sentence."""

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
    ticket = sessions.issue_ticket("ada", browser, return_to="/jobs?job=1")
    host = base_url.split("://", 1)[1]
    with TestClient(app, base_url=base_url, follow_redirects=False) as client:
        client.cookies.set(serve.XSRF_COOKIE, XSRF)
        answer = client.post(
            sessions.START_PATH,
            params={"ticket": ticket},
            headers={"origin": f"http://{host}", "host": host, **headers},
        )
    assert answer.status_code == 303, answer.text  # the browser goes back to the page, cookie set
    assert answer.headers["location"] == "/jobs?job=1"
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


def test_a_spent_ticket_sets_no_cookie_and_says_so(data_dir: Path) -> None:
    """The browser navigates to this route: a ticket used twice (or another browser's) gets a
    page with a sentence and the way back, not a cookie and not a blank error."""
    accounts.add_account(cli_principal(), "ada", "editor", "correct horse battery")
    app = Starlette(routes=[Route(sessions.START_PATH, serve.start, methods=["POST"])])
    browser = returns.browser_key(XSRF)
    assert browser is not None
    ticket = sessions.issue_ticket("ada", browser)
    host = "dash.test:8501"
    with TestClient(app, base_url=f"http://{host}", follow_redirects=False) as client:
        client.cookies.set(serve.XSRF_COOKIE, XSRF)
        kwargs = {"params": {"ticket": ticket}, "headers": {"origin": f"http://{host}"}}
        assert client.post(sessions.START_PATH, **kwargs).status_code == 303
        again = client.post(sessions.START_PATH, **kwargs)
        foreign = client.post(sessions.START_PATH, params={"ticket": ticket})  # no Origin
    assert again.status_code == 403 and "set-cookie" not in again.headers
    assert "did not finish" in again.text and 'href="/"' in again.text
    assert foreign.status_code == 403 and "set-cookie" not in foreign.headers
