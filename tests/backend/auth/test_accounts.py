"""Built-in accounts on a real SQLite file: argon2 hashes, sign-in, and the user changes.

Sign-in throttling has its own tests (test_throttle.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from argon2 import PasswordHasher

from backend.auth import accounts, throttle
from backend.auth.cli import cli_principal
from backend.auth.roles import Role, Via
from backend.errors import UserError
from storage.repo import users as user_store

PASSWORD = "correct horse battery"


def _add(name: str = "ada", role: str = "editor") -> accounts.Account:
    return accounts.add_account(cli_principal(), name, role, PASSWORD)


def test_password_is_stored_as_an_argon2id_hash_not_as_text(data_dir: Path) -> None:
    _add()
    stored = user_store.get_user("ada").password_hash
    assert stored.startswith("$argon2id$") and PASSWORD not in stored
    assert PasswordHasher().verify(stored, PASSWORD)


def test_right_password_signs_in_with_the_accounts_role(data_dir: Path) -> None:
    _add(role="viewer")
    principal = accounts.sign_in("ada", PASSWORD)
    assert (principal.name, principal.role, principal.via) == ("ada", Role.VIEWER, Via.PASSWORD)
    assert user_store.get_user("ada").last_signin_at is not None


@pytest.mark.parametrize("name,password", [("ada", "wrong password!"), ("nobody", PASSWORD)])
def test_wrong_password_or_unknown_name_gives_the_same_sentence(
    data_dir: Path, name: str, password: str
) -> None:
    _add()
    with pytest.raises(accounts.SignInError, match="Wrong account name or password"):
        accounts.sign_in(name, password)


def test_short_password_is_refused_and_nothing_is_stored(data_dir: Path) -> None:
    with pytest.raises(UserError, match="at least 10 characters"):
        accounts.add_account(cli_principal(), "ada", "viewer", "short")
    assert accounts.list_accounts() == []


def test_duplicate_name_and_bad_name_are_refused(data_dir: Path) -> None:
    _add()
    with pytest.raises(UserError, match="already exists"):
        _add()
    with pytest.raises(UserError, match="not a usable account name"):
        _add(name="ada; drop table users")
    assert [a.name for a in accounts.list_accounts()] == ["ada"]


def test_a_success_resets_the_failure_count(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_SIGNIN_MAX_FAILURES", "2")
    _add()
    for _ in range(3):
        for _ in range(2):
            with pytest.raises(accounts.SignInError, match="Wrong"):
                accounts.sign_in("ada", "not the password", "203.0.113.9")
        assert accounts.sign_in("ada", PASSWORD, "203.0.113.9").name == "ada"
    assert throttle.wait_s("ada", "203.0.113.9") == 0.0


def test_the_last_admin_cannot_be_removed_or_demoted(data_dir: Path) -> None:
    _add("root", "admin")
    with pytest.raises(UserError, match="last admin"):
        accounts.remove_account(cli_principal(), "root")
    with pytest.raises(UserError, match="last admin"):
        accounts.set_role(cli_principal(), "root", "viewer")
    _add("second", "admin")
    accounts.set_role(cli_principal(), "root", "viewer")
    assert accounts.principal_for("root").role == Role.VIEWER


def test_a_removed_account_no_longer_resolves(data_dir: Path) -> None:
    _add()
    accounts.remove_account(cli_principal(), "ada")
    assert accounts.principal_for("ada") is None


def test_identity_provider_users_get_their_accounts_role_or_the_default(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    accounts.add_account(cli_principal(), "lead@example.com", "admin", None)
    lead = {"email": "lead@example.com", "email_verified": True}
    new = {"email": "new@example.com", "email_verified": True}
    assert accounts.oidc_principal(lead).role == Role.ADMIN
    assert accounts.oidc_principal(new).role == Role.VIEWER
    monkeypatch.setenv("OPTIBOARD_OIDC_DEFAULT_ROLE", "none")
    assert accounts.oidc_principal(new) is None
    with pytest.raises(accounts.SignInError):  # no password: only the provider signs them in
        accounts.sign_in("lead@example.com", "")
