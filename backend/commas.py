"""Comma lists as people type them ('1, 2,,4'), read one way by CLI flags, URL keys and forms."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from backend.errors import UserError

T = TypeVar("T")


def comma_list(text: str | None) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c']: parts stripped, empty ones dropped; None or '' -> []."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def comma_numbers(text: str | None, kind: Callable[[str], T], what: str) -> list[T]:
    """comma_list read as numbers of `kind` (int, float); anything else is one sentence naming
    `what` (a flag such as --rate, or a form field's label)."""
    try:
        return [kind(part) for part in comma_list(text)]
    except ValueError:
        raise UserError(f"{what} takes numbers separated by commas, not {text!r}.") from None
