"""Signed, expiring, read-only links to one comparison, for someone without an account.

A token is `<payload>.<mac>` in base64url: the payload names the jobs and the expiry, the MAC is
HMAC-SHA256 under a secret kept in the data directory (created once, mode 0600). Changing a job id
or the expiry breaks the MAC; deleting the secret file revokes every link. Expiry is set and
checked on the database's clock, so a web host whose clock is off can neither extend nor cut links.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import settings
from backend.auth.audit import Action, audited
from backend.auth.roles import Principal, Role, Via
from backend.errors import UserError
from storage.clock import database_now

SECRET_FILE = "link_secret"
_VERSION = "v1"


class LinkError(UserError):
    """A link that is malformed, tampered with or expired."""


@dataclass(frozen=True)
class SharedComparison:
    jobs: tuple[int, ...]
    expires_at: datetime  # aware UTC

    def principal(self) -> Principal:
        """The read-only visitor such a link lets in."""
        return Principal("shared-link", Role.VIEWER, Via.LINK, jobs=self.jobs)


def signing_secret() -> bytes:
    """The signing key, created on first use with mode 0600.

    Written to a private temporary file, then hard-linked into place: the link either creates the
    complete file or fails because another process already did, so nobody reads a half-written key.
    """
    path = Path(settings.data_dir()) / SECRET_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".link_secret.")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(32))
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
    return path.read_bytes()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(payload: bytes) -> bytes:
    return hmac.new(signing_secret(), payload, hashlib.sha256).digest()


def sign(jobs: tuple[int, ...], expires_at: datetime) -> str:
    """A token for these jobs until expires_at (aware or naive UTC)."""
    if not jobs:
        raise UserError("Pick at least one job before making a link.")
    stamp = int(expires_at.replace(tzinfo=expires_at.tzinfo or UTC).timestamp())
    payload = f"{_VERSION}:{','.join(str(j) for j in sorted(set(jobs)))}:{stamp}".encode()
    return f"{_b64(payload)}.{_b64(_mac(payload))}"


def verify(token: str, now: datetime | None = None) -> SharedComparison:
    """The comparison a token grants, or LinkError when it is tampered with or expired (by the
    database's clock unless `now` is given)."""
    bad = LinkError("This link is not valid; ask the person who shared it for a new one.")
    try:
        payload_text, mac_text = token.split(".")
        payload, mac = _unb64(payload_text), _unb64(mac_text)
    except ValueError:
        raise bad from None
    if not hmac.compare_digest(mac, _mac(payload)):
        raise bad
    version, job_text, stamp = payload.decode().split(":")
    if version != _VERSION:
        raise bad
    expires_at = datetime.fromtimestamp(int(stamp), UTC)
    if (now or database_now()) >= expires_at:
        raise LinkError("This link has expired; ask the person who shared it for a new one.")
    return SharedComparison(tuple(int(j) for j in job_text.split(",")), expires_at)


def create_link(actor: Principal, jobs: tuple[int, ...], days: float) -> str:
    """A signed token for an editor's comparison, audited like every mutation."""
    longest = settings.LINK_MAX_DAYS.get()
    if not 0 < days <= longest:
        raise UserError(
            f"A link may last from a moment up to {longest:g} days; pick a value in that range."
        )
    expires_at = database_now() + timedelta(days=days)
    target = "jobs " + ",".join(str(j) for j in sorted(set(jobs)))
    with audited(actor, Action.LINK_CREATE, target, expires_at=expires_at.isoformat()):
        return sign(jobs, expires_at)
