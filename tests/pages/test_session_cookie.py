"""The cookie a password sign-in gets: the page posts its one-time ticket until it is traded."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.auth import sessions
from pages.access import TICKET_KEY
from tests.pages.seed import ROOT, make_account, sign_in_as


def _posted(at: AppTest) -> list[str]:
    """The session-start posts this run drew (st.html scripts that fetch START_PATH)."""
    bodies = [str(getattr(e.proto, "body", "")) for e in at.get("html")]
    return [b for b in bodies if sessions.START_PATH in b]


def test_a_sign_in_ticket_is_posted_on_every_run_until_the_browser_trades_it(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun started later in a run drops what that run queued: a post drawn once and then
    dropped left the sign-in without its cookie, so a reload asked again."""
    monkeypatch.setenv("OPTIBOARD_AUTH", "on")
    at = sign_in_as(AppTest.from_file(str(ROOT / "app.py"), default_timeout=60), "editor")
    session = sessions.begin(make_account("editor"))
    assert session is not None
    ticket = sessions.issue_ticket(session, "browser-key")
    at.session_state[TICKET_KEY] = ticket

    at.run()
    assert len(_posted(at)) == 1 and ticket in _posted(at)[0]  # once a run: app.py's gate
    at.run()  # as if the first run's post had been dropped: posted again
    assert len(_posted(at)) == 1 and ticket in _posted(at)[0]

    assert sessions.redeem(ticket, "browser-key") is not None  # the browser traded it
    at.run()
    assert _posted(at) == []
    assert TICKET_KEY not in at.session_state
