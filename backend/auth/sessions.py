"""Password sign-ins that outlast the browser tab: a signed, expiring, HttpOnly session cookie.

Streamlit's scripts run over a websocket and cannot set cookies, so the cookie is set by a small
HTTP route beside the app (serve.py): after a password sign-in the page gets a one-time ticket
(60 s, bound to the browser by its XSRF token, see returns.browser_key), and a same-origin fetch
trades it at the route for the cookie. Later runs read the cookie (st.context.cookies) and check it
here. The cookie holds `<payload>.<mac>` in base64url: the account, a session id, the expiry and a
fingerprint of the account's password hash (a new password ends every older session), under
HMAC-SHA256 with a key derived from the data directory's secret (links.py). Signing out records
the session id in the database (storage.repo.revocations), so a copied cookie stays refused after
a restart and on every app process, and deletes the cookie in the browser. Cookie expiry is set
and checked on the database's clock, like signed links.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import settings
from backend.auth import links
from storage.clock import database_now
from storage.repo import revocations
from storage.repo import users as user_store

COOKIE = "optiboard_session"
START_PATH = "/_optiboard/session/start"
END_PATH = "/_optiboard/session/end"
TICKET_TTL_S = 60.0
_VERSION = "s1"

_lock = threading.Lock()
_tickets: dict[str, tuple[float, str, str]] = {}  # ticket -> (until, account, browser key)


@dataclass(frozen=True)
class Session:
    name: str
    session_id: str
    expires_at: float  # unix time


def _key() -> bytes:
    return hmac.new(links._secret(), b"optiboard-session-cookie", hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _fingerprint(name: str) -> str | None:
    """A digest of the account's password hash; None when the account or password is gone."""
    row = user_store.get_user(name)
    if row is None or row.password_hash is None:
        return None
    return hashlib.sha256(row.password_hash.encode()).hexdigest()[:16]


def lifetime_s() -> int:
    return int(settings.SESSION_HOURS.get() * 3600)


def issue_ticket(name: str, browser: str, now: float | None = None) -> str:
    """A one-time ticket this browser trades for the cookie within TICKET_TTL_S."""
    now = time.time() if now is None else now
    ticket = secrets.token_urlsafe(32)
    with _lock:
        for stale in [t for t, (until, _, _) in _tickets.items() if until <= now]:
            del _tickets[stale]
        _tickets[ticket] = (now + TICKET_TTL_S, name, browser)
    return ticket


def redeem(ticket: str, browser: str | None, now: float | None = None) -> str | None:
    """The cookie value for a valid ticket presented by the browser it was issued to, once.

    `now` is this process's clock, which issued the ticket; the cookie's expiry is counted from
    the database's clock."""
    now = time.time() if now is None else now
    with _lock:
        found = _tickets.pop(ticket, None)
    if found is None or browser is None:
        return None
    until, name, issued_to = found
    if until <= now or not hmac.compare_digest(issued_to, browser):
        return None
    fingerprint = _fingerprint(name)
    if fingerprint is None:
        return None
    payload = {
        "v": _VERSION,
        "n": name,
        "s": secrets.token_urlsafe(16),
        "e": int(database_now().timestamp()) + lifetime_s(),
        "p": fingerprint,
    }
    body = json.dumps(payload, separators=(",", ":")).encode()
    return f"{_b64(body)}.{_b64(hmac.new(_key(), body, hashlib.sha256).digest())}"


def _decode(cookie: str) -> dict | None:
    try:
        body_text, mac_text = cookie.split(".")
        body, mac = _unb64(body_text), _unb64(mac_text)
    except ValueError:
        return None
    if not hmac.compare_digest(mac, hmac.new(_key(), body, hashlib.sha256).digest()):
        return None
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    return payload if isinstance(payload, dict) and payload.get("v") == _VERSION else None


def verify(cookie: str | None, now: float | None = None) -> Session | None:
    """The session a cookie carries while it is genuine, unexpired (by the database's clock
    unless `now` is given), not signed out, and the account still has the password it was made
    with; else None."""
    payload = _decode(cookie) if cookie else None
    if payload is None:
        return None
    now = database_now().timestamp() if now is None else now
    if payload["e"] <= now or revocations.is_revoked(payload["s"]):
        return None
    if _fingerprint(payload["n"]) != payload["p"]:
        return None
    return Session(payload["n"], payload["s"], payload["e"])


def revoke(cookie: str | None) -> None:
    """Sign a session out: its cookie is refused from now on, even if copied before, by every
    app process and after restarts, until it would have expired anyway."""
    payload = _decode(cookie) if cookie else None
    if payload is None:
        return
    expires_at = datetime.fromtimestamp(payload["e"], UTC).replace(tzinfo=None)
    revocations.revoke_session(payload["s"], expires_at)
