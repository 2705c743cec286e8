"""A signed-out session cookie stays refused after the app restarts (revocations are stored).

A real `streamlit run serve.py`: the cookie is signed out through the server's own route, the
server is stopped and a new one started on the same data directory, and real Chromium presents
the copied cookie to the new server. A second session of the same account, never signed out,
still opens the app there, so the refusal is the sign-out's doing.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.browsing import chromium, skip_without_chromium
from tests.dashboard import serve_py

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery"
pytestmark = pytest.mark.e2e


@contextmanager
def _server(data_dir: Path, log: Path) -> Iterator[str]:
    with serve_py(data_dir, log, append=True) as (url, _):
        yield url


def _sign_out(url: str, cookie: str) -> int:
    """POST the server's sign-out route as the app's own page does (same origin)."""
    from backend.auth import sessions

    request = urllib.request.Request(
        f"{url}{sessions.END_PATH}",
        method="POST",
        headers={"Origin": url, "Cookie": f"{sessions.COOKIE}={cookie}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status


def _opens_signed_in(browser, url: str, cookie: str) -> bool:  # noqa: ANN001
    """Whether a fresh browser holding only this cookie gets in (True) or the sign-in form."""
    from playwright.sync_api import expect

    from backend.auth import sessions

    context = browser.new_context()
    context.add_cookies([{"name": sessions.COOKIE, "value": cookie, "url": url}])
    page = context.new_page()
    page.goto(f"{url}/jobs")
    signed_in = page.get_by_text("Signed in as ada (editor)")
    gate = page.get_by_role("heading", name="Sign in to Optiboard")
    expect(signed_in.or_(gate)).to_be_visible(timeout=60_000)
    result = signed_in.count() > 0
    context.close()
    return result


def test_a_signed_out_cookie_stays_refused_after_a_restart(
    data_dir: Path,
    tmp_path: Path,
) -> None:
    skip_without_chromium()
    from backend.auth import accounts, sessions
    from backend.auth.cli import cli_principal

    accounts.add_account(cli_principal(), "ada", "editor", PASSWORD)
    # what the sign-in route hands two browsers (same secret and database as the servers)
    traded = [
        sessions.trade(sessions.issue_ticket("ada", browser), browser)
        for browser in ("browser-1", "browser-2")
    ]
    assert all(traded)
    signed_out, kept = (t.cookie for t in traded if t is not None)
    log = tmp_path / "streamlit.log"

    with _server(data_dir, log) as url:
        assert _sign_out(url, signed_out) == 204
    with _server(data_dir, log) as url, chromium() as browser:
        assert _opens_signed_in(browser, url, kept)
        assert not _opens_signed_in(browser, url, signed_out)
