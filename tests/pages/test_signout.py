"""Signing out of an identity-provider sign-in, through app.py as a browser session runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.auth import accounts
from backend.auth.cli import cli_principal
from tests.pages.seed import ROOT, texts

AUTH = {  # an [auth] section as secrets.toml holds it: what makes the provider's button appear
    "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
    "cookie_secret": "not-a-real-secret",
    "client_id": "optiboard",
    "client_secret": "not-a-real-secret",
    "server_metadata_url": "http://127.0.0.1:1/.well-known/openid-configuration",
}


def _signed_in_through_the_provider() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "lead@example.com", "email_verified": True}
    return at.run()


def test_an_identity_provider_sign_out_ends_its_run_with_the_redirect_in_flight(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """st.logout() only queues the browser's redirect to the provider's end_session. The run
    that signed out went on into the page, which found nobody signed in and reran: a rerun
    drops what the run queued, so under load the browser stayed, showing the sign-in form, and
    the user stayed signed in at the provider (tests/e2e/test_signin.py saw it under load)."""
    monkeypatch.setenv("OPTIBOARD_AUTH", "on")
    accounts.add_account(cli_principal(), "lead@example.com", "editor", None)
    at = _signed_in_through_the_provider()
    assert "Signed in as lead@example.com (editor)" in [t.value for t in at.text]

    at.button(key="sign_out").click().run()

    assert not at.exception
    assert at.user.get("is_logged_in") is False  # st.logout() ran: Streamlit forgot the user
    # a rerun would have drawn the sign-in form (the user's info is gone after st.logout)
    assert "Sign in to Optiboard" not in texts(at)
