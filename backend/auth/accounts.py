"""Built-in accounts: argon2id password hashes, sign-in throttled per client and account
(backend/auth/throttle.py), and the user changes an admin (or the CLI) makes, each one audited."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

import settings
from backend.auth import throttle
from backend.auth.audit import Action, Outcome, audited, record
from backend.auth.roles import Principal, Role, Via, parse_role
from backend.errors import UserError
from storage.repo import users as user_store
from storage.repo.users import UserRow

MIN_PASSWORD_LENGTH = 10
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
_HASHER = PasswordHasher()  # argon2id with the library's current recommended parameters


@functools.cache
def _dummy_hash() -> str:
    """Verified when the name is unknown, so a wrong name costs as long as a wrong password.
    Made on first use, not at import: every CLI start and page process imported it (0.1 s)."""
    return _HASHER.hash("not a password of anyone")


class SignInError(UserError):
    """Wrong name or password, or a client that must wait after repeated failures."""


@dataclass(frozen=True)
class Account:
    """What pages and the CLI show about an account (never the hash)."""

    name: str
    role: Role
    has_password: bool
    throttled_until: datetime | None  # new addresses wait until then (naive UTC); None: no wait
    last_signin_at: datetime | None
    created_at: datetime


def _account(row: UserRow) -> Account:
    return Account(
        row.name,
        Role(row.role),
        row.password_hash is not None,
        throttle.account_blocked_until(row.name),
        row.last_signin_at,
        row.created_at,
    )


def hash_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UserError(
            f"The password is too short; use at least {MIN_PASSWORD_LENGTH} characters."
        )
    return _HASHER.hash(password)


def _check_name(name: str) -> str:
    name = name.strip()
    if not _NAME.match(name):
        raise UserError(
            f"{name!r} is not a usable account name; use letters, digits and . _ @ + - "
            "(up to 128 characters)."
        )
    return name


def check_new_name(name: str) -> str:
    """A name a new account can take (usable, not taken), checked before its password is asked
    for; add_account checks again as it creates the account."""
    name = _check_name(name)
    if user_store.get_user(name) is not None:
        raise UserError(f"An account named {name!r} already exists; pick another name.")
    return name


def list_accounts() -> list[Account]:
    return [_account(r) for r in user_store.list_users()]


def principal_for(name: str) -> Principal | None:
    """The signed-in person as the database says now: removals and new roles apply at once."""
    row = user_store.get_user(name)
    return Principal(row.name, Role(row.role), Via.PASSWORD) if row else None


def sign_in(name: str, password: str, client: str = throttle.LOCAL) -> Principal:
    """Check a password from this client (its address, throttle.client_of), audited.

    A wrong password or unknown name reads the same and costs one hash check, so a visitor cannot
    tell them apart. Repeated failures make this client (and, for new addresses, the account)
    wait before the next try; a try during the wait is refused before the password is checked.
    """
    name = name.strip()
    wait = throttle.wait_s(name, client)
    if wait > 0:
        raise SignInError(
            f"Too many failed sign-ins; wait {math.ceil(wait)} s and try again, or ask an admin "
            "to reset the password."
        )
    row = user_store.get_user(name)
    if row is None or row.password_hash is None:
        _verify(_dummy_hash(), password)
        _failed(name, client)
    right = _verify(row.password_hash, password)
    if not right:
        _failed(name, client)
    if _HASHER.check_needs_rehash(row.password_hash):
        user_store.set_password_hash(row.name, _HASHER.hash(password))
    user_store.record_success(row.name)
    throttle.succeeded(row.name, client)
    record(row.name, Action.SIGN_IN, row.name, Outcome.OK, client=client)
    return Principal(row.name, Role(row.role), Via.PASSWORD)


def _failed(name: str, client: str) -> NoReturn:
    """Count and audit a wrong name or password (and any wait it starts), then refuse."""
    actor = f"client:{client}"
    record(actor, Action.SIGN_IN, name, Outcome.FAILED, "wrong account name or password")
    for started in throttle.failed(name, client):
        record(
            actor,
            Action.SIGNIN_THROTTLE,
            name if started.scope == "account" else client,
            Outcome.OK,
            scope=started.scope,
            failures=started.failures,
            until=started.until.isoformat(),
        )
    raise SignInError(
        "Wrong account name or password; check both and try again, or ask an admin to reset "
        "the password."
    )


def signed_out(principal: Principal) -> None:
    """Audit a sign-out (the page ends the session itself)."""
    record(principal.actor, Action.SIGN_OUT, principal.name, Outcome.OK)


def _verify(password_hash: str, password: str) -> bool:
    try:
        return _HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def add_account(actor: Principal, name: str, role: str, password: str | None) -> Account:
    """A new account; without a password it can only sign in through the identity provider."""
    name, parsed = _check_name(name), parse_role(role)
    password_hash = hash_password(password) if password is not None else None
    with audited(actor, Action.USER_ADD, name, role=parsed.value):
        try:
            row = user_store.create_user(name, password_hash, parsed.value)
        except user_store.NameTaken:
            raise UserError(
                f"An account named {name!r} already exists; pick another name."
            ) from None
    return _account(row)


def existing_account(name: str) -> UserRow:
    row = user_store.get_user(name)
    if row is None:
        raise UserError(f"There is no account named {name!r}; check the name in the user list.")
    return row


def _keep_an_admin(row: UserRow, new_role: Role | None) -> None:
    if row.role == Role.ADMIN and new_role != Role.ADMIN and user_store.count_role(Role.ADMIN) <= 1:
        raise UserError(
            f"{row.name} is the last admin; make another admin first so someone can manage users."
        )


def set_role(actor: Principal, name: str, role: str) -> None:
    parsed = parse_role(role)
    with audited(actor, Action.USER_ROLE, name, role=parsed.value):
        _keep_an_admin(existing_account(name), parsed)
        user_store.set_role(name, parsed.value)
        user_store.end_sessions(name)  # signed-in tabs sign in again, under the new role


def set_password(actor: Principal, name: str, password: str) -> None:
    """A new password, which also ends the account's sign-in wait."""
    password_hash = hash_password(password)
    with audited(actor, Action.USER_PASSWORD, name):
        existing_account(name)
        user_store.set_password_hash(name, password_hash)
        user_store.end_sessions(name)  # whoever knew the old password is out at their next run
        throttle.lift(name)


def remove_account(actor: Principal, name: str) -> None:
    with audited(actor, Action.USER_REMOVE, name):
        _keep_an_admin(existing_account(name), None)
        user_store.delete_user(name)


UNVERIFIED_EMAIL = (
    "Your identity provider did not confirm that {email} is your address (email_verified is not "
    "true), so it names no account here; verify the address with the provider, or ask an admin "
    "for a built-in account."
)


def oidc_principal(claims: Mapping[str, Any], fallback_role: str | None = None) -> Principal | None:
    """An identity-provider user: the role of the account named by their e-mail, else the default.

    The e-mail names an account (or becomes one) only when the provider says it verified it
    (`email_verified: true`): an address anyone can type into their IdP profile must not become
    an admin's account. Refused with SignInError otherwise. Returns None when
    OPTIBOARD_OIDC_DEFAULT_ROLE is `none` and no account names them.
    """
    email = str(claims.get("email") or "")
    if not email:
        return None
    if claims.get("email_verified") is not True:
        raise SignInError(UNVERIFIED_EMAIL.format(email=email))
    row = user_store.get_user(email)
    if row is not None:
        return Principal(row.name, Role(row.role), Via.OIDC)
    default = fallback_role or settings.OIDC_DEFAULT_ROLE.get()
    if default.strip().lower() == "none":
        return None
    return Principal(email, parse_role(default), Via.OIDC)
