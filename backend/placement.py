"""Where a configuration runs (hardware target, replicas), checked where a configuration is made.

Below specs.py, so the spec does not import the cluster package above it."""

from __future__ import annotations

import re

from backend.errors import UserError

TARGET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def check_cluster_fields(target: str, replicas: int) -> None:
    """A target names a Ray resource (`target:<name>`), so it stays a short plain word."""
    if target and not TARGET_NAME.fullmatch(target):
        raise UserError(
            f"Target name {target!r} is not valid; use letters, digits, '.', '_' or '-'."
        )
    if not 1 <= replicas <= 64:
        raise UserError(f"Replicas must be between 1 and 64, not {replicas}.")
