"""Cached compatibility matrices, keyed by model content and a runtime fingerprint."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select

from storage.db import session_scope
from storage.schema import CompatCache


def get_compat(model_sha256: str, fingerprint: str) -> dict[str, Any] | None:
    with session_scope() as session:
        return session.scalar(
            select(CompatCache.payload).where(
                CompatCache.model_sha256 == model_sha256, CompatCache.fingerprint == fingerprint
            )
        )


def put_compat(model_sha256: str, fingerprint: str, payload: dict[str, Any]) -> None:
    with session_scope() as session:
        session.execute(
            delete(CompatCache).where(
                CompatCache.model_sha256 == model_sha256, CompatCache.fingerprint == fingerprint
            )
        )
        session.add(
            CompatCache(model_sha256=model_sha256, fingerprint=fingerprint, payload=payload)
        )
