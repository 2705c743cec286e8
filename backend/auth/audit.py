"""Every mutation recorded with who and when, before it runs, then closed with its outcome.

The entry is committed before the action starts: an action that raises is marked `failed` with its
error, one refused by role is `denied`, and one cut short by a crash stays `started`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

from backend.auth.actions import Action  # re-exported
from backend.auth.actor import acting_as
from backend.auth.roles import Permission, PermissionDenied, Principal, require
from storage.repo import audit as audit_store
from storage.repo.audit import AuditRow


class Outcome(StrEnum):
    STARTED = audit_store.STARTED
    OK = "ok"
    FAILED = "failed"
    DENIED = "denied"


NEEDS: dict[Action, Permission] = {
    Action.UPLOAD: Permission.UPLOAD,
    Action.SUBMIT: Permission.SUBMIT,
    Action.RETRY: Permission.SUBMIT,
    Action.CANCEL: Permission.CANCEL,
    Action.DELETE: Permission.DELETE,
    Action.LINK_CREATE: Permission.SHARE,
    Action.BASELINE_PIN: Permission.SUBMIT,
    Action.BASELINE_UNPIN: Permission.SUBMIT,
    Action.USER_ADD: Permission.USERS,
    Action.USER_ROLE: Permission.USERS,
    Action.USER_PASSWORD: Permission.USERS,
    Action.USER_REMOVE: Permission.USERS,
}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:500]


@contextmanager
def audited(principal: Principal, action: Action, target: str = "", **detail: Any) -> Iterator[int]:
    """Check the role, record the attempt, run the body, record how it ended; yields the entry."""
    entry = audit_store.open_entry(principal.actor, action.value, target, detail)
    try:
        require(principal, NEEDS[action])
    except PermissionDenied as exc:
        audit_store.close_entry(entry, Outcome.DENIED.value, _one_line(exc))
        raise
    with acting_as(principal.actor):  # the queue credits a job to its submitter with it
        try:
            yield entry
        except BaseException as exc:
            audit_store.close_entry(entry, Outcome.FAILED.value, _one_line(exc))
            raise
    audit_store.close_entry(entry, Outcome.OK.value)


def record(
    actor: str,
    action: Action,
    target: str,
    outcome: Outcome,
    error: str | None = None,
    **detail: Any,
) -> None:
    """An access event that has already happened (a sign-in, a failure, a throttle, a sign-out)."""
    entry = audit_store.open_entry(actor, action.value, target, detail)
    audit_store.close_entry(entry, outcome.value, error)


def recent(limit: int = 200, actor: str | None = None) -> list[AuditRow]:
    return audit_store.list_entries(limit=limit, actor=actor)
