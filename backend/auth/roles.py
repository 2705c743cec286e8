"""Roles and what each may do; `require` is the one check every mutation goes through."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from backend.errors import UserError


class Role(StrEnum):
    VIEWER = "viewer"
    EDITOR = "editor"
    ADMIN = "admin"


class Permission(StrEnum):
    BROWSE = "browse"
    COMPARE = "compare"
    UPLOAD = "upload"
    SUBMIT = "submit"
    CANCEL = "cancel"
    SHARE = "share"  # make a signed read-only link to one comparison
    DELETE = "delete"
    USERS = "users"


_VIEWER = frozenset({Permission.BROWSE, Permission.COMPARE})
_EDITOR = _VIEWER | {Permission.UPLOAD, Permission.SUBMIT, Permission.CANCEL, Permission.SHARE}
_ADMIN = _EDITOR | {Permission.DELETE, Permission.USERS}

PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.VIEWER: _VIEWER,
    Role.EDITOR: frozenset(_EDITOR),
    Role.ADMIN: frozenset(_ADMIN),
}


class Via(StrEnum):
    """How the person got in: it decides what the audit log calls them."""

    PASSWORD = "password"
    OIDC = "oidc"
    LINK = "link"
    CLI = "cli"
    OPEN = "open"  # OPTIBOARD_AUTH=off


@dataclass(frozen=True)
class Principal:
    """Who is acting. A signed link is a viewer limited to the jobs it names."""

    name: str
    role: Role
    via: Via
    jobs: tuple[int, ...] | None = None  # a signed link's comparison; None: no job limit

    @property
    def actor(self) -> str:
        """The name written to the audit log."""
        return self.name if self.via == Via.PASSWORD else f"{self.via.value}:{self.name}"

    def can(self, permission: Permission) -> bool:
        if self.via == Via.LINK:
            return permission == Permission.COMPARE
        return permission in PERMISSIONS[self.role]


class PermissionDenied(UserError):
    """The signed-in role may not do this."""


def parse_role(text: str) -> Role:
    try:
        return Role(text.strip().lower())
    except ValueError:
        choices = ", ".join(r.value for r in Role)
        raise UserError(f"Unknown role {text!r}; choose one of {choices}.") from None


def require(principal: Principal, permission: Permission) -> None:
    """Raise PermissionDenied unless principal may do this; pages call it before every mutation."""
    if not principal.can(permission):
        raise PermissionDenied(
            f"Your role ({principal.role.value}) may not {permission.value}; "
            "ask an admin for a role that can."
        )
