"""Sign-in throttling: repeated failures slow the one who fails, never lock the account's owner.

A hard lock after N wrong guesses let anyone lock any account (the admin's included) forever, by
guessing badly every few minutes. Instead, failures are counted in the database per client
address and per account, and past a free allowance each further failure doubles the wait before
the next try (1, 2, 4 ... s, at most OPTIBOARD_SIGNIN_LOCK_SECONDS):
- per address (all accounts): one machine guessing is slowed to one try per longest wait;
- per account (all addresses), after ACCOUNT_FACTOR times the allowance: many machines guessing
  one account are slowed too, but only addresses this account has not signed in from within
  storage.repo.throttle.KEEP_S wait, so the owner signing in from their usual machine gets in.
A wait is checked before the password, so a throttled try learns nothing about it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import settings
from backend.commas import comma_list
from storage.clock import database_now
from storage.repo import throttle as store

_LOG = logging.getLogger(__name__)
_warned: list[bool] = []  # the proxy warning, once per process
ACCOUNT_FACTOR = 4  # an account's own allowance, in multiples of an address's
LOCAL = "local"  # the client of a sign-in from this host (Streamlit gives no address then)


@dataclass(frozen=True)
class Started:
    """A wait that a failure just started: for the audit log."""

    scope: str  # "client" or "account"
    failures: int
    until: datetime  # naive UTC, by the database's clock


def client_of(peer: str | None, forwarded_for: str | None, hops: int | None = None) -> str:
    """The client's address: the TCP peer, or with OPTIBOARD_TRUSTED_PROXY_HOPS = n proxies in
    front, the address the outermost of them saw (the n-th entry of X-Forwarded-For from the
    right; entries further left are whatever the client wrote)."""
    hops = settings.TRUSTED_PROXY_HOPS.get() if hops is None else hops
    forwarded = forwarded_for if isinstance(forwarded_for, str) else ""
    chain = comma_list(forwarded)
    if hops > 0 and len(chain) >= hops:
        return chain[-hops][:100]
    if chain and hops == 0 and not _warned:
        _warned.append(True)
        _LOG.warning(
            "Sign-ins arrive through a proxy (X-Forwarded-For) but OPTIBOARD_TRUSTED_PROXY_HOPS "
            "is 0: every client behind it shares one sign-in throttle; set it to the number of "
            "proxies in front of the dashboard."
        )
    return peer[:100] if isinstance(peer, str) and peer else LOCAL


def _client(client: str) -> str:
    return f"client:{client}"


def _account(name: str) -> str:
    return f"account:{name.strip().lower()[:200]}"


def _known(name: str, client: str) -> str:
    return f"known:{name.strip().lower()[:200]}|{client}"


def wait_s(name: str, client: str) -> float:
    """Seconds this client must wait before trying this account name; 0 when it may try now."""
    keys = [_client(client)]
    if not store.exists(_known(name, client)):
        keys.append(_account(name))
    until = store.blocked_until(keys)
    if until is None:
        return 0.0
    return max(0.0, (until.replace(tzinfo=UTC) - database_now()).total_seconds())


def failed(name: str, client: str) -> list[Started]:
    """Count a wrong name or password against the client and the account; the waits it starts."""
    free, longest = settings.SIGNIN_MAX_FAILURES.get(), settings.SIGNIN_LOCK_SECONDS.get()
    started = []
    for scope, key, allowance in (
        ("client", _client(client), free),
        ("account", _account(name), free * ACCOUNT_FACTOR),
    ):
        count, until = store.record_failure(key, allowance, longest)
        if until is not None:
            started.append(Started(scope, count, until))
    return started


def succeeded(name: str, client: str) -> None:
    """A right password: this client starts afresh and is known to the account from now on.

    The account's own count stays: many addresses guessing it do not get a fresh allowance each
    time its owner signs in (it fades after a quiet day, or with a password reset)."""
    store.clear([_client(client)])
    store.touch(_known(name, client))


def lift(name: str) -> None:
    """An admin's password reset ends the account's wait (addresses keep theirs)."""
    store.clear([_account(name)])


def account_blocked_until(name: str) -> datetime | None:
    """When the account-wide wait for unknown addresses ends (naive UTC), if one runs now."""
    return store.blocked_until([_account(name)])
