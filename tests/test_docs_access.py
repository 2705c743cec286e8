"""docs/security.md states how long a sign-in lasts as the code does it."""

from __future__ import annotations

from pathlib import Path

import settings

SECURITY = Path(__file__).resolve().parents[1] / "docs" / "security.md"


def _section(title: str) -> str:
    text = SECURITY.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_security_page_says_the_sign_in_cookie_lasts_session_hours() -> None:
    section = " ".join(_section("Passwords and sign-ins").split())
    assert "lasts for the browser tab's session" not in section  # the cookie outlives the tab
    hours = settings.SESSION_HOURS.default
    assert f"sign-in lasts `{settings.SESSION_HOURS.name}` ({hours} by default)" in section
    assert "reloads and new tabs included" in section
