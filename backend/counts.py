"""A count and its noun, singular for one: "1 runtime node ran", "2 runtime nodes ran"."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 configuration', '4 configurations'; `plural` where adding an s is wrong ('1 was')."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
