"""Who may upload into the web process's memory, and how much one browser session may hold there.

Streamlit keeps every file a browser PUTs to /_stcore/upload_file/<session>/<file> in memory until
the session ends, for any session that has a websocket open, signed in or not: 64 x 5 MB took the
web process from 312 to 634 MB. serve.py's upload gate asks this module before Streamlit reads a
byte of the body: the session must belong to someone who may upload (an editor or admin, as
pages/access.py recorded for its last run), and what it holds plus the new file must stay within
OPTIBOARD_UPLOAD_SESSION_FILES files and OPTIBOARD_UPLOAD_SESSION_MB megabytes. Uploads in flight
are reserved here, so concurrent PUTs cannot pass the cap together.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import IntEnum

import settings
from backend.auth.roles import Permission, Principal

FORGET_AFTER_S = 24 * 3600.0  # a session not seen for this long is dropped from the registry
MB = 1 << 20


class Refusal(IntEnum):
    """Why an upload is refused, as the HTTP status the gate answers with."""

    NOT_ALLOWED = 403  # not signed in, or a role that may not upload
    TOO_LARGE = 413  # the session's bytes would pass OPTIBOARD_UPLOAD_SESSION_MB
    TOO_MANY = 429  # the session's files would pass OPTIBOARD_UPLOAD_SESSION_FILES
    NO_LENGTH = 411  # no Content-Length: the size must be known before the body is read


SENTENCES = {
    Refusal.NOT_ALLOWED: "Uploads need a signed-in editor or admin; sign in with such an account.",
    Refusal.TOO_LARGE: "This browser session already holds as many uploaded megabytes as it may "
    "(OPTIBOARD_UPLOAD_SESSION_MB); remove a file from an uploader or reload the page.",
    Refusal.TOO_MANY: "This browser session already holds as many uploaded files as it may "
    "(OPTIBOARD_UPLOAD_SESSION_FILES); remove a file from an uploader or reload the page.",
    Refusal.NO_LENGTH: "An upload must say its size (Content-Length); send it from the page.",
}


@dataclass
class _Session:
    may_upload: bool
    seen: float
    in_flight: dict[str, int] = field(default_factory=dict)  # file id -> bytes reserved


_lock = threading.Lock()
_sessions: dict[str, _Session] = {}


def record(session_id: str, principal: Principal | None, now: float | None = None) -> None:
    """What this session's last run resolved (None: nobody signed in); pages/access.py calls it."""
    now = time.time() if now is None else now
    allowed = principal is not None and principal.can(Permission.UPLOAD)
    with _lock:
        for stale in [s for s, v in _sessions.items() if now - v.seen > FORGET_AFTER_S]:
            del _sessions[stale]
        found = _sessions.get(session_id)
        if found is None:
            _sessions[session_id] = _Session(allowed, now)
        else:
            found.may_upload, found.seen = allowed, now


def reserve(
    session_id: str, file_id: str, size: int | None, held: dict[str, int]
) -> Refusal | None:
    """Reserve room for one upload, or say why not. `held` is what Streamlit keeps for the
    session now (file id -> bytes); a file id already held is replaced, so it counts once."""
    files, limit = settings.UPLOAD_SESSION_FILES.get(), settings.UPLOAD_SESSION_MB.get() * MB
    with _lock:
        found = _sessions.get(session_id)
        if found is None or not found.may_upload:
            return Refusal.NOT_ALLOWED
        if size is None:
            return Refusal.NO_LENGTH
        others = {k: v for k, v in {**held, **found.in_flight}.items() if k != file_id}
        if len(others) + 1 > files:
            return Refusal.TOO_MANY
        if sum(others.values()) + size > limit:
            return Refusal.TOO_LARGE
        found.in_flight[file_id] = size
    return None


def release(session_id: str, file_id: str) -> None:
    """The upload ended (stored by Streamlit, or failed): its reservation is no longer needed."""
    with _lock:
        found = _sessions.get(session_id)
        if found is not None:
            found.in_flight.pop(file_id, None)
