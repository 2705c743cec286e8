"""Where an identity-provider sign-in should land: the view a shared link pointed to.

Streamlit's st.login round trip always ends on the app's root (its /oauth2callback redirects to
"/"), and the browser session that asked for it is gone by then. So before st.login the sign-in
page remembers the link's path and query here, keyed by the browser, and the first signed-in run
takes it back (once) and opens that view. The key is a hash of the token inside Streamlit's XSRF
cookie: the same browser keeps that token across the round trip (Streamlit re-masks the cookie but
keeps its token), another site cannot read it, and nothing new has to be set in the browser.
Entries live ten minutes in this server process, which is the one the callback returns to.
"""

from __future__ import annotations

import binascii
import hashlib
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

TTL_S = 600.0
MAX_ENTRIES = 10_000  # a flood of sign-in clicks cannot grow the process without bound


@dataclass(frozen=True)
class Target:
    """A view inside the app: a page's url_path and its query (never another site)."""

    page: str
    query: dict[str, list[str]]


_lock = threading.Lock()
_pending: dict[str, tuple[float, Target]] = {}


def browser_key(xsrf_cookie: str | None) -> str | None:
    """A stable key for one browser from Streamlit's XSRF cookie ('2|mask|masked|time'), or None
    when there is no such cookie (XSRF protection off) or it is not in that format."""
    parts = (xsrf_cookie or "").strip("\"'").split("|")
    if len(parts) != 4 or parts[0] != "2":
        return None
    try:
        mask, masked = binascii.a2b_hex(parts[1]), binascii.a2b_hex(parts[2])
    except (binascii.Error, ValueError):
        return None
    if len(mask) != 4 or not masked:
        return None
    token = bytes(b ^ mask[i % 4] for i, b in enumerate(masked))
    return hashlib.sha256(b"optiboard-return:" + token).hexdigest()


def remember(key: str, target: Target, now: float | None = None) -> None:
    """Keep the target for this browser until it signs in (or TTL_S passes)."""
    now = time.monotonic() if now is None else now
    with _lock:
        for stale in [k for k, (until, _) in _pending.items() if until <= now]:
            del _pending[stale]
        if len(_pending) >= MAX_ENTRIES:
            _pending.pop(next(iter(_pending)))
        _pending[key] = (now + TTL_S, target)


def take(key: str, now: float | None = None) -> Target | None:
    """The target remembered for this browser, once; None when none is pending or it expired."""
    now = time.monotonic() if now is None else now
    with _lock:
        found = _pending.pop(key, None)
    if found is None or found[0] <= now:
        return None
    return found[1]


def local_path(address: str) -> str:
    """`address` when it is a path on this site ("/compare?jobs=1"), else "/": where a redirect
    after sign-in may send the browser, never another site ("//host", "/\\host", "https:...")."""
    if (
        not address.startswith("/")
        or address.startswith("//")
        or "\\" in address
        or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in address)
    ):
        return "/"
    parts = urlsplit(address)
    return address if not parts.scheme and not parts.netloc else "/"
