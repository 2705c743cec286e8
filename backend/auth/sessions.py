"""Password sign-ins that outlast the browser tab: a signed, expiring, HttpOnly session cookie,
and the rule every run applies to a signed-in session (`live`).

Streamlit's scripts run over a websocket and cannot set cookies, so the cookie is set by a small
HTTP route beside the app (serve.py): after a password sign-in the page gets a one-time ticket
(60 s, bound to the browser by its XSRF token, see returns.browser_key, and to the address the
sign-in returns to), and the browser itself goes to the route (a same-origin form POST), which
trades the ticket for the cookie of the same session and redirects to that address. The page
there is the first to say "Signed in as", and only because its run read the cookie
(st.context.cookies holds the cookies of the page load), so a link opened or a reload from then
on is signed in too (a fetch in the background had left the tab saying so before the cookie
existed). The cookie holds `<payload>.<mac>` in base64url: the account, a session id, the expiry
and the account's session generation, under HMAC-SHA256 with a key derived from the data
directory's secret (links.py).

A session ends when its id is signed out (storage.repo.revocations: a copied cookie stays refused
after a restart and on every app process) or when the account's generation moves on
(storage.repo.users.end_sessions: a new password, a new role, a removal end every session made
before). Pages check `live` on every run, not only when a tab connects, so an ended session is
signed out at its next run in every tab that holds it. Expiry is set and checked on the
database's clock, like signed links.
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
from backend.auth import links, returns
from storage.clock import database_now
from storage.repo import revocations
from storage.repo import users as user_store

COOKIE = "optiboard_session"
START_PATH = "/_optiboard/session/start"
END_PATH = "/_optiboard/session/end"
TICKET_TTL_S = 60.0
_VERSION = "s2"  # s1 cookies (a password fingerprint, no generation) are refused


@dataclass(frozen=True)
class Session:
    name: str
    session_id: str
    expires_at: float  # unix time
    generation: int = 0  # the account's session generation when the session began


@dataclass(frozen=True)
class _Ticket:
    until: float  # this process's clock
    session: Session | str  # a session, or an account's name (a new session of it)
    browser: str  # returns.browser_key of the browser it was issued to
    return_to: str  # a path on this site (returns.local_path)


@dataclass(frozen=True)
class Traded:
    """A ticket traded: the cookie's value and the address the browser goes back to."""

    cookie: str
    return_to: str


_lock = threading.Lock()
_tickets: dict[str, _Ticket] = {}


def _key() -> bytes:
    return hmac.new(links.signing_secret(), b"optiboard-session-cookie", hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def lifetime_s() -> int:
    return int(settings.SESSION_HOURS.get() * 3600)


def begin(name: str) -> Session | None:
    """A new session of this account (at its current generation); None without such account."""
    generation = user_store.session_generation(name)
    if generation is None:
        return None
    expires_at = int(database_now().timestamp()) + lifetime_s()
    return Session(name, secrets.token_urlsafe(16), expires_at, generation)


def issue_ticket(
    session: Session | str, browser: str, now: float | None = None, return_to: str = "/"
) -> str:
    """A one-time ticket this browser trades for the cookie of this session (or of a new session
    of the account named) within TICKET_TTL_S; the trade sends it back to `return_to` (a path on
    this site, else the root: the ticket decides where, not the request that spends it)."""
    now = time.time() if now is None else now
    ticket = secrets.token_urlsafe(32)
    with _lock:
        for stale in [t for t, held in _tickets.items() if held.until <= now]:
            del _tickets[stale]
        _tickets[ticket] = _Ticket(
            now + TICKET_TTL_S, session, browser, returns.local_path(return_to)
        )
    return ticket


def ticket_pending(ticket: str, now: float | None = None) -> bool:
    """True while the ticket is issued, unexpired and not yet traded for its cookie."""
    now = time.time() if now is None else now
    with _lock:
        found = _tickets.get(ticket)
    return found is not None and found.until > now


def trade(ticket: str, browser: str | None, now: float | None = None) -> Traded | None:
    """The cookie value and return address for a valid ticket presented by the browser it was
    issued to, once, while its session is live.

    `now` is this process's clock, which issued the ticket; the cookie's expiry is counted from
    the database's clock."""
    now = time.time() if now is None else now
    with _lock:
        found = _tickets.pop(ticket, None)
    if found is None or browser is None:
        return None
    if found.until <= now or not hmac.compare_digest(found.browser, browser):
        return None
    session = begin(found.session) if isinstance(found.session, str) else found.session
    if session is None or not live(session):
        return None
    payload = {
        "v": _VERSION,
        "n": session.name,
        "s": session.session_id,
        "e": int(session.expires_at),
        "g": session.generation,
    }
    body = json.dumps(payload, separators=(",", ":")).encode()
    cookie = f"{_b64(body)}.{_b64(hmac.new(_key(), body, hashlib.sha256).digest())}"
    return Traded(cookie, found.return_to)


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


def live(session: Session, now: float | None = None) -> bool:
    """Whether a session still holds: unexpired (by the database's clock unless `now` is given),
    not signed out, and the account still exists with a password at the session's generation.
    Every run of a signed-in page asks this again."""
    now = database_now().timestamp() if now is None else now
    if session.expires_at <= now or revocations.is_revoked(session.session_id):
        return False
    row = user_store.get_user(session.name)
    return (
        row is not None
        and row.password_hash is not None
        and (row.session_generation == session.generation)
    )


def verify(cookie: str | None, now: float | None = None) -> Session | None:
    """The session a cookie carries while it is genuine and live; else None."""
    payload = _decode(cookie) if cookie else None
    if payload is None:
        return None
    try:
        session = Session(
            str(payload["n"]), str(payload["s"]), float(payload["e"]), int(payload["g"])
        )
    except (KeyError, TypeError, ValueError):
        return None
    return session if live(session, now) else None


def revoke(cookie: str | None) -> None:
    """Sign a session out: its cookie is refused from now on, even if copied before, by every
    app process and after restarts, until it would have expired anyway."""
    payload = _decode(cookie) if cookie else None
    if payload is not None:
        end(Session(str(payload["n"]), str(payload["s"]), float(payload["e"])))


def end(session: Session) -> None:
    """Sign this session out, in every tab and process that holds it (see revoke)."""
    expires_at = datetime.fromtimestamp(session.expires_at, UTC).replace(tzinfo=None)
    revocations.revoke_session(session.session_id, expires_at)
