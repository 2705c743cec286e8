"""Counts as readers see them: a count and its noun, singular for one ("1 runtime node ran",
"2 runtime nodes ran"), and a large count on a prefix ("38.2 k")."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 configuration', '4 configurations'; `plural` where adding an s is wrong ('1 was')."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def scaled(value: float, unit: str = "") -> str:
    """38.2 k, 1.23 G parameters or FLOPs, 45.6 MB: three significant digits on an SI prefix,
    the one way every page writes a large count (Home, Models and Graph wrote 38218, 38.2k
    and 38.22 k for one model's parameters)."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}".strip()
