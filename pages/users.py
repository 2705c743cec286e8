"""Users (admins only): accounts and roles, password resets, and the audit log of every change."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from backend.auth import accounts
from backend.auth.audit import recent
from backend.auth.roles import Permission, Role
from backend.errors import UserError
from pages.access import current
from pages.components.formatting import EMPTY, plain
from pages.components.gate import require_access
from pages.components.widgets import page_header, show_error

require_access(Permission.USERS)  # before anything is drawn or read: components/gate.py

page_header("Users", "Who may sign in, with which role; every change lands in the audit log.")

ROLES = [r.value for r in Role]
rows = accounts.list_accounts()
st.dataframe(
    pd.DataFrame(
        {
            "account": [a.name for a in rows],
            "role": [a.role.value for a in rows],
            "sign-in": ["password" if a.has_password else "identity provider" for a in rows],
            "new addresses wait until (UTC)": [a.throttled_until for a in rows],
            "last sign-in (UTC)": [a.last_signin_at for a in rows],
        }
    ),
    hide_index=True,
    width="stretch",
    placeholder=EMPTY,
)

add, change = st.columns(2)
with add, st.form("add_user", clear_on_submit=True):
    st.subheader("Add an account")
    name = st.text_input("Account name (an e-mail for identity-provider users)", key="new_name")
    role = st.selectbox("Role", ROLES, key="new_role")
    password = st.text_input(
        "Password (leave empty for identity-provider sign-in only)",
        type="password",
        key="new_password",
    )
    if st.form_submit_button("Add account", type="primary"):
        try:
            accounts.add_account(current(), name, role, password or None)
            st.success(f"Added {name.strip()} ({role}).")
        except UserError as exc:
            show_error(exc)


with change:
    st.subheader("Change an account")
    roles_of = {a.name: a.role.value for a in accounts.list_accounts()}

    def _picked() -> None:  # "New role" starts at the picked account's role, not at viewer
        st.session_state["edit_role"] = roles_of.get(st.session_state.get("edit_name"), ROLES[0])

    names = list(roles_of)
    who = st.selectbox("Account", names, key="edit_name", on_change=_picked) if names else None
    if who is not None:
        st.session_state.setdefault("edit_role", roles_of[who])
        new_role = st.selectbox("New role", ROLES, key="edit_role")
        new_password = st.text_input("New password", type="password", key="edit_password")
        buttons = st.columns(3)
        # each button drawn before any acts: a refusal (the last admin's role) must not hide
        # the others until the next run
        set_role = buttons[0].button("Set role", key="set_role")
        set_password = buttons[1].button("Set password", key="set_password")
        confirm = f"confirm_remove_{who}"  # its box is drawn below, after any removal
        remove = buttons[2].button(
            "Remove", key="remove_user", disabled=not st.session_state.get(confirm)
        )
        if remove:  # each removal asks again, refused or not
            st.session_state[confirm] = False
        try:
            if set_role:
                accounts.set_role(current(), who, new_role)
                st.success(f"{who} is now {new_role}.")
            if set_password:
                accounts.set_password(current(), who, new_password)
                st.success(f"Password of {who} changed; any sign-in wait on the account has ended.")
            if remove:
                accounts.remove_account(current(), who)
                st.success(f"Removed {who}.")
        except UserError as exc:
            show_error(exc)
        if who in {a.name for a in accounts.list_accounts()}:
            if not st.checkbox(f"Yes, remove the account {plain(who)}", key=confirm):
                st.caption(f"Tick the box to remove {plain(who)}: its sign-ins end, for good.")

st.subheader("Audit log")
log = recent(limit=200)
st.dataframe(
    pd.DataFrame(
        {
            "when (UTC)": [e.at for e in log],
            "who": [e.actor for e in log],
            "action": [e.action for e in log],
            "target": [e.target for e in log],
            "outcome": [e.outcome for e in log],
            "error": [e.error or "" for e in log],
        }
    ),
    hide_index=True,
    width="stretch",
    placeholder=EMPTY,
)
