"""Sign-in throttling on a real SQLite file with real argon2 accounts: wrong guesses slow the one
who guesses, never lock the account's owner out (a hard lock let anyone lock the admin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.auth import accounts, throttle
from backend.auth.audit import Action, recent
from backend.auth.cli import cli_principal

PASSWORD = "correct horse battery"
ATTACKER, OWNER = "203.0.113.9", "198.51.100.7"


@pytest.fixture
def admin(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPTIBOARD_SIGNIN_MAX_FAILURES", "3")
    monkeypatch.setenv("OPTIBOARD_SIGNIN_LOCK_SECONDS", "900")
    accounts.add_account(cli_principal(), "root", "admin", PASSWORD)
    return "root"


def _refused(name: str, password: str, client: str) -> str:
    with pytest.raises(accounts.SignInError) as refused:
        accounts.sign_in(name, password, client)
    return str(refused.value)


def test_guessing_from_one_address_slows_that_address_and_the_owner_still_signs_in(
    admin: str,
) -> None:
    for _ in range(4):  # three cost nothing, the fourth starts a wait
        assert _refused(admin, "not the password", ATTACKER).startswith("Wrong")
    for _ in range(8):  # more failures counted (as after waiting each time): 2^7 s = 128 s
        throttle.failed(admin, ATTACKER)
    assert throttle.wait_s(admin, ATTACKER) > 100
    # the right password from the attacker's address is refused before it is checked ...
    assert _refused(admin, PASSWORD, ATTACKER).startswith("Too many failed sign-ins; wait")
    # ... and so is any name from there: the wait belongs to the address
    assert _refused("nobody-here", PASSWORD, ATTACKER).startswith("Too many failed sign-ins")
    # the owner, on another machine, is not locked out
    assert accounts.sign_in(admin, PASSWORD, OWNER).name == admin

    entries = {(e.action, e.outcome, e.target) for e in recent()}
    assert (Action.SIGN_IN.value, "failed", admin) in entries
    assert (Action.SIGNIN_THROTTLE.value, "ok", ATTACKER) in entries  # the wait that started
    assert (Action.SIGN_IN.value, "ok", admin) in entries
    assert {e.actor for e in recent() if e.outcome == "failed"} == {f"client:{ATTACKER}"}


def test_many_addresses_guessing_one_account_slow_new_addresses_but_not_the_owners(
    admin: str,
) -> None:
    assert accounts.sign_in(admin, PASSWORD, OWNER).name == admin  # the owner's usual machine
    for index in range(13):  # a botnet: 13 addresses, one guess each (3 x 4 are free)
        _refused(admin, "not the password", f"192.0.2.{index}")
    for _ in range(6):
        throttle.failed(admin, "192.0.2.200")
    assert throttle.wait_s(admin, "192.0.2.99") > 30  # a fresh address waits for this account
    assert _refused(admin, PASSWORD, "192.0.2.99").startswith("Too many failed sign-ins")
    assert accounts.sign_in(admin, PASSWORD, OWNER).name == admin  # the owner does not
    (account,) = accounts.list_accounts()
    assert account.throttled_until is not None
    assert any(
        e.action == Action.SIGNIN_THROTTLE.value and e.detail["scope"] == "account"
        for e in recent()
    )
    # an admin's password reset ends the account's wait for new addresses too
    accounts.set_password(cli_principal(), admin, "a brand new passphrase")
    assert accounts.sign_in(admin, "a brand new passphrase", "192.0.2.99").name == admin


def test_a_wrong_password_and_an_unknown_name_read_the_same(admin: str) -> None:
    assert _refused(admin, "not the password", ATTACKER) == _refused(
        "nobody-here", PASSWORD, ATTACKER
    )


def test_sign_out_is_audited(admin: str) -> None:
    principal = accounts.sign_in(admin, PASSWORD, OWNER)
    accounts.signed_out(principal)
    assert recent()[0].action == Action.SIGN_OUT.value and recent()[0].actor == admin


def test_the_client_address_is_the_peer_unless_proxies_are_declared() -> None:
    forwarded = "10.9.9.9, 203.0.113.9"  # the client wrote the first, the proxy appended the last
    assert throttle.client_of("172.17.0.2", forwarded, hops=0) == "172.17.0.2"
    assert throttle.client_of("172.17.0.2", forwarded, hops=1) == "203.0.113.9"
    assert throttle.client_of("172.17.0.2", forwarded, hops=2) == "10.9.9.9"
    assert throttle.client_of("172.17.0.2", None, hops=1) == "172.17.0.2"
    assert throttle.client_of(None, None, hops=0) == throttle.LOCAL
