"""Counts as readers see them: a count and its noun, singular for one ("1 runtime node ran",
"2 runtime nodes ran"), a large count on a prefix ("38.2 k"), and a size in bytes ("3.7 KB")."""

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


def byte_size(size: float) -> str:
    """512 B, 3.7 KB, 45.6 MB, 3.0 GB: a file's size in the product's units (KB, MB, GB are 2^10,
    2^20, 2^30 bytes: docs/measurement.md), the one way the CLI and the pages write it (`add`
    printed a 3.7 KB model as "0.0 MiB" where the Models page said "3.7 KB")."""
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"
