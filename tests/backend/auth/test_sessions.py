"""The password session cookie's rules, on a real SQLite file with real argon2 accounts."""

from __future__ import annotations

import time
from pathlib import Path

from backend.auth import accounts, sessions
from backend.auth.cli import cli_principal

PASSWORD = "correct horse battery"


def _cookie(name: str = "ada", now: float | None = None) -> str:
    ticket = sessions.issue_ticket(name, "browser-1", now=now)
    traded = sessions.trade(ticket, "browser-1", now=now)
    assert traded is not None
    return traded.cookie


def test_a_ticket_is_spent_once_and_only_by_the_browser_it_was_issued_to(data_dir: Path) -> None:
    accounts.add_account(cli_principal(), "ada", "editor", PASSWORD)
    ticket = sessions.issue_ticket("ada", "browser-1")

    assert sessions.trade(ticket, "browser-2") is None  # another browser: refused and spent
    assert sessions.trade(ticket, "browser-1") is None
    late = sessions.issue_ticket("ada", "browser-1", now=time.time() - sessions.TICKET_TTL_S)
    assert sessions.trade(late, "browser-1") is None
    assert sessions.trade(sessions.issue_ticket("ada", "browser-1"), "browser-1") is not None


def test_a_traded_ticket_sends_the_browser_back_where_its_sign_in_began(data_dir: Path) -> None:
    """The ticket decides where the trade returns to, not the request that spends it."""
    accounts.add_account(cli_principal(), "ada", "editor", PASSWORD)
    back = sessions.trade(sessions.issue_ticket("ada", "b", return_to="/compare?jobs=1"), "b")
    assert back is not None and back.return_to == "/compare?jobs=1"
    assert sessions.verify(back.cookie) is not None
    elsewhere = sessions.trade(sessions.issue_ticket("ada", "b", return_to="//evil.example"), "b")
    assert elsewhere is not None and elsewhere.return_to == "/"
    assert sessions.trade(sessions.issue_ticket("ada", "b"), "b").return_to == "/"  # type: ignore[union-attr]


def test_a_cookie_holds_until_it_expires_is_signed_out_or_the_password_changes(
    data_dir: Path,
) -> None:
    accounts.add_account(cli_principal(), "ada", "editor", PASSWORD)
    accounts.add_account(cli_principal(), "bob", "viewer", PASSWORD)
    cookie = _cookie()

    session = sessions.verify(cookie)
    assert session is not None and session.name == "ada"
    assert session.expires_at - time.time() > sessions.lifetime_s() - 60
    assert sessions.verify(cookie, now=session.expires_at) is None  # expired

    body, mac = cookie.split(".")
    bob_cookie = _cookie("bob")
    bob_body = bob_cookie.split(".")[0]
    assert sessions.verify(f"{bob_body}.{mac}") is None  # another account's payload, ada's MAC
    assert sessions.verify(f"{body}.{mac[:-2]}AA") is None
    assert sessions.verify("not a cookie") is None

    sessions.revoke(cookie)
    assert sessions.verify(cookie) is None
    other = _cookie()
    assert sessions.verify(other) is not None  # only that session ended
    accounts.set_password(cli_principal(), "ada", "a brand new password")
    assert sessions.verify(other) is None
    assert sessions.verify(bob_cookie) is not None
    accounts.remove_account(cli_principal(), "bob")
    assert sessions.verify(bob_cookie) is None  # a removed account's cookie opens nothing


def test_a_new_role_ends_the_accounts_sessions_and_a_recreated_account_starts_afresh(
    data_dir: Path,
) -> None:
    accounts.add_account(cli_principal(), "ada", "editor", PASSWORD)
    accounts.add_account(cli_principal(), "root", "admin", PASSWORD)
    cookie, held = _cookie(), sessions.begin("ada")
    assert held is not None and sessions.live(held)
    accounts.set_role(cli_principal(), "ada", "viewer")
    assert sessions.verify(cookie) is None and not sessions.live(held)
    assert sessions.verify(_cookie()) is not None  # a new sign-in under the new role

    cookie = _cookie()
    accounts.remove_account(cli_principal(), "ada")
    accounts.add_account(cli_principal(), "ada", "admin", PASSWORD)  # someone else, same name
    assert sessions.verify(cookie) is None
    sessions.end(sessions.begin("root") or held)
    assert sessions.verify(_cookie("root")) is not None  # ending one session ends only that one
