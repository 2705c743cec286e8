"""What the audit log names an entry (backend.auth.audit), apart from its store: the CLI names the
action of every verb it audits while building nothing more than its parser."""

from __future__ import annotations

from enum import StrEnum


class Action(StrEnum):
    UPLOAD = "upload"
    SUBMIT = "submit"
    RETRY = "retry"
    CANCEL = "cancel"
    DELETE = "delete"
    LINK_CREATE = "link_create"
    BASELINE_PIN = "baseline_pin"
    BASELINE_UNPIN = "baseline_unpin"
    USER_ADD = "user_add"
    USER_ROLE = "user_role"
    USER_PASSWORD = "user_password"
    USER_REMOVE = "user_remove"
    # Access events, recorded as they happen (record()), not mutations: no permission needed.
    SIGN_IN = "sign_in"
    SIGN_OUT = "sign_out"
    SIGNIN_THROTTLE = "signin_throttle"
