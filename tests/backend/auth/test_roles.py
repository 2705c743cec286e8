"""The roles matrix: viewer browses and compares, editor adds upload/submit/cancel/share, admin
adds delete and users; a signed link only compares."""

from __future__ import annotations

import pytest

from backend.auth.roles import Permission, PermissionDenied, Principal, Role, Via, require

P = Permission
ALLOWED = {
    Role.VIEWER: {P.BROWSE, P.COMPARE},
    Role.EDITOR: {P.BROWSE, P.COMPARE, P.UPLOAD, P.SUBMIT, P.CANCEL, P.SHARE},
    Role.ADMIN: set(Permission),
}


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("permission", list(Permission))
def test_roles_matrix(role: Role, permission: Permission) -> None:
    principal = Principal("someone", role, Via.PASSWORD)
    if permission in ALLOWED[role]:
        require(principal, permission)
    else:
        with pytest.raises(PermissionDenied, match=f"may not {permission.value}"):
            require(principal, permission)


@pytest.mark.parametrize("permission", list(Permission))
def test_a_signed_link_only_compares(permission: Permission) -> None:
    link = Principal("shared-link", Role.VIEWER, Via.LINK, jobs=(1,))
    assert link.can(permission) == (permission == P.COMPARE)


def test_audit_names_say_how_someone_got_in() -> None:
    assert Principal("ada", Role.ADMIN, Via.PASSWORD).actor == "ada"
    assert Principal("ada@x.org", Role.ADMIN, Via.OIDC).actor == "oidc:ada@x.org"
    assert Principal("root", Role.ADMIN, Via.CLI).actor == "cli:root"
