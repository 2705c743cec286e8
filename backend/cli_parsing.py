"""Small parsers for the CLI's comma lists and NAME=VALUE dimensions."""

from __future__ import annotations

from backend.errors import UserError


def csv_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def dims_from_pairs(pairs: list[str]) -> dict[str, int]:
    dims = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not value.strip().isdigit():
            raise UserError(f"--dim takes NAME=VALUE, e.g. --dim seq=128, not {pair!r}.")
        dims[name.strip()] = int(value)
    return dims
