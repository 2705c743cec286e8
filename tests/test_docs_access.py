"""README's Access control section states how long a sign-in lasts as the code does it."""

from __future__ import annotations

from pathlib import Path

import settings

README = Path(__file__).resolve().parents[1] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    return text[start : text.index("\n## ", start + 1)]


def test_access_control_says_the_sign_in_cookie_lasts_session_hours() -> None:
    section = " ".join(_section("Access control").split())
    assert "lasts for the browser tab's session" not in section  # the cookie outlives the tab
    hours = settings.SESSION_HOURS.default
    assert f"sign-in lasts `{settings.SESSION_HOURS.name}` ({hours} by default)" in section
    assert "reloads and new tabs included" in section
