"""Signed comparison links: HMAC under a 0600 secret in the data directory, expiry, tampering."""

from __future__ import annotations

import base64
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from backend.auth import links
from backend.auth.roles import Principal, Role, Via
from backend.errors import UserError

SOON = datetime.now(UTC) + timedelta(hours=1)


def test_a_signed_link_grants_exactly_its_jobs_until_it_expires(data_dir: Path) -> None:
    token = links.sign((3, 1), SOON)
    shared = links.verify(token)
    assert shared.jobs == (1, 3)
    assert shared.principal().can is not None and shared.principal().via == Via.LINK
    with pytest.raises(links.LinkError, match="expired"):
        links.verify(token, now=SOON + timedelta(seconds=1))


def test_the_secret_is_created_once_with_mode_0600(data_dir: Path) -> None:
    links.sign((1,), SOON)
    secret = data_dir / links.SECRET_FILE
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert len(secret.read_bytes()) == 32
    before = secret.read_bytes()
    links.sign((2,), SOON)
    assert secret.read_bytes() == before
    assert not list(data_dir.glob(".link_secret.*")), "no temporary file is left behind"


def _tamper(token: str, change: str) -> str:
    payload, mac = token.split(".")
    text = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()
    if change == "jobs":
        text = text.replace(":1:", ":1,2:")
    else:
        version, jobs, stamp = text.split(":")
        text = f"{version}:{jobs}:{int(stamp) + 86400 * 365}"
    forged = base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()
    return f"{forged}.{mac}"


@pytest.mark.parametrize("change", ["jobs", "expiry"])
def test_a_changed_job_or_expiry_breaks_the_signature(data_dir: Path, change: str) -> None:
    token = links.sign((1,), SOON)
    with pytest.raises(links.LinkError, match="not valid"):
        links.verify(_tamper(token, change))


@pytest.mark.parametrize("token", ["", "garbage", "a.b.c", "!!!.???"])
def test_malformed_tokens_are_refused_with_one_sentence(data_dir: Path, token: str) -> None:
    with pytest.raises(links.LinkError, match="not valid"):
        links.verify(token)


def test_deleting_the_secret_revokes_every_link(data_dir: Path) -> None:
    token = links.sign((1,), SOON)
    (data_dir / links.SECRET_FILE).unlink()
    with pytest.raises(links.LinkError, match="not valid"):
        links.verify(token)


def test_making_a_link_needs_the_share_permission_and_a_sane_lifetime(data_dir: Path) -> None:
    editor = Principal("ed", Role.EDITOR, Via.PASSWORD)
    viewer = Principal("vi", Role.VIEWER, Via.PASSWORD)
    assert links.verify(links.create_link(editor, (4,), 1.0)).jobs == (4,)
    with pytest.raises(UserError, match="may not share"):
        links.create_link(viewer, (4,), 1.0)
    with pytest.raises(UserError, match="up to 30 days"):
        links.create_link(editor, (4,), 365.0)
