"""A password sign-in with a cookie: the tab says "Signing in…" and sends the browser to trade its
one-time ticket (a form POST to serve.py's route, which loads the page again with the cookie);
it never says "Signed in as" before that."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.auth import sessions
from pages.access import TICKET_KEY
from tests.pages.seed import ROOT, make_account


def _going(at: AppTest) -> list[str]:
    """The navigations to the session-start route this run drew (st.html form POSTs)."""
    bodies = [str(getattr(e.proto, "body", "")) for e in at.get("html")]
    return [b for b in bodies if sessions.START_PATH in b and "form.submit()" in b]


def _text(at: AppTest) -> str:
    return " ".join(str(getattr(e, "value", "")) for e in [*at.main, *at.sidebar])


def test_a_sign_in_is_not_shown_as_done_until_the_browser_has_its_cookie(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_AUTH", "on")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    session = sessions.begin(make_account("editor"))
    assert session is not None
    ticket = sessions.issue_ticket(session, "browser-key", return_to="/jobs")
    at.session_state[TICKET_KEY] = ticket

    at.run()
    assert len(_going(at)) == 1 and ticket in _going(at)[0]
    assert [i.value for i in at.info] == ["Signing in…"]
    assert "Signed in as" not in _text(at) and not at.button  # no page, no sign-out, no form
    at.run()  # a rerun before the browser got there (a dropped element): sent again
    assert len(_going(at)) == 1 and ticket in _going(at)[0]

    assert sessions.trade(ticket, "browser-key") is not None  # the browser traded it
    at.run()  # this tab has no cookie (the browser left it for the page the route loaded)
    assert _going(at) == [] and TICKET_KEY not in at.session_state
    assert "Signed in as" not in _text(at)
    assert [h.value for h in at.title] == ["Sign in to Optiboard"]
    assert any("did not finish" in w.value for w in at.warning)
