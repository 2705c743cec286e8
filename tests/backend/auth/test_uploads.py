"""The upload gate's rules (serve.py asks them before Streamlit reads an upload's body); the real
server is driven in tests/e2e/test_upload_gate.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.auth import uploads
from backend.auth.links import SharedComparison
from backend.auth.roles import Principal, Role, Via

MB = uploads.MB
EDITOR = Principal("ed", Role.EDITOR, Via.PASSWORD)


@pytest.fixture(autouse=True)
def caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIBOARD_UPLOAD_SESSION_FILES", "2")
    monkeypatch.setenv("OPTIBOARD_UPLOAD_SESSION_MB", "10")


def test_only_sessions_whose_last_run_was_an_editor_or_admin_may_upload() -> None:
    assert uploads.reserve("never-ran", "f", 1, {}) == uploads.Refusal.NOT_ALLOWED
    link = SharedComparison((1,), datetime.now(UTC)).principal()
    for who in (None, Principal("vi", Role.VIEWER, Via.PASSWORD), link):
        uploads.record("s-other", who)
        assert uploads.reserve("s-other", "f", 1, {}) == uploads.Refusal.NOT_ALLOWED
    uploads.record("s-other", EDITOR)
    assert uploads.reserve("s-other", "f", 1, {}) is None
    uploads.record("s-other", None)  # signed out: the next upload is refused
    assert uploads.reserve("s-other", "g", 1, {}) == uploads.Refusal.NOT_ALLOWED


def test_uploads_in_flight_count_against_the_cap_until_released() -> None:
    uploads.record("s1", EDITOR)
    assert uploads.reserve("s1", "a", 6 * MB, {}) is None  # in flight, not yet held
    assert uploads.reserve("s1", "b", 6 * MB, {}) == uploads.Refusal.TOO_LARGE
    assert uploads.reserve("s1", "b", 4 * MB, {}) is None
    assert uploads.reserve("s1", "c", 1, {}) == uploads.Refusal.TOO_MANY
    uploads.release("s1", "a")
    uploads.release("s1", "b")
    held = {"a": 6 * MB, "b": 4 * MB}  # now Streamlit holds both
    assert uploads.reserve("s1", "c", 1, held) == uploads.Refusal.TOO_MANY
    assert uploads.reserve("s1", "a", 6 * MB, held) is None  # the same file id replaces itself
    assert uploads.reserve("s1", "z", None, {}) == uploads.Refusal.NO_LENGTH
