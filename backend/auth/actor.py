"""Who the audited action in progress is for, apart from the audit log's store (SQLAlchemy):
the job specs credit a submitted job to it, and the CLI's parser imports those specs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# Whichever door (page, CLI) the submit came through, backend.auth.audit.audited sets it.
ACTOR: ContextVar[str | None] = ContextVar("optiboard_audited_actor", default=None)


def current_actor() -> str | None:
    """The actor of the audited action running now in this thread, or None outside one."""
    return ACTOR.get()


@contextmanager
def acting_as(actor: str) -> Iterator[None]:
    """current_actor() is `actor` inside the block."""
    token = ACTOR.set(actor)
    try:
        yield
    finally:
        ACTOR.reset(token)
