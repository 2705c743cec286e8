"""The sign-in form app.py shows instead of any page until someone has signed in.

Nothing here changes st.query_params, so the address a visitor came with (a shared link's page and
its view settings) is still there after a password sign-in, and the same view opens. An identity
provider's round trip ends on the app's root, so that view is remembered before st.login and
reopened after it (access.remember_view / resume_view).
"""

from __future__ import annotations

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from backend.auth import accounts, throttle
from backend.errors import UserError
from pages.access import (
    finishing_sign_in,
    oidc_configured,
    remember_view,
    sign_in_address,
    sign_in_lapsed,
    signed_in,
)


def _client() -> str:
    """This browser's address as the sign-in throttle counts it (behind proxies, the one the
    outermost proxy saw: OPTIBOARD_TRUSTED_PROXY_HOPS)."""
    return throttle.client_of(st.context.ip_address, st.context.headers.get("X-Forwarded-For"))


def render(requested: StreamlitPage | None) -> None:
    """The form; `requested` is the page the address points to, opened after sign-in (None: a
    page drew the form itself, components/gate.py, and the address stays as it is)."""
    if finishing_sign_in():  # not "Signed in as" until the page loaded with the cookie says so
        st.info("Signing in…", icon="🔐")
        return
    st.title("Sign in to Optiboard")
    if sign_in_lapsed():
        st.warning("Your last sign-in did not finish in this tab; please sign in again.", icon="⏳")
    if st.query_params.to_dict():
        st.caption("Sign in to open the view this link points to.")
    if oidc_configured() and st.button("Sign in with your organisation", type="primary"):
        if requested is not None:
            remember_view(requested)
        st.login()
    if not accounts.list_accounts() and not oidc_configured():
        st.info(
            "No accounts yet. On the server, create the first admin with "
            "`python -m backend.cli users add NAME --role admin`.",
            icon="👤",
        )
    with st.form("sign_in"):
        name = st.text_input("Account", key="signin_name", autocomplete="username")
        password = st.text_input(
            "Password", type="password", key="signin_password", autocomplete="current-password"
        )
        submitted = st.form_submit_button("Sign in")
    if submitted:
        try:
            principal = accounts.sign_in(name, password, _client())
        except UserError as exc:
            st.error(str(exc), icon="🔒")
            return
        signed_in(principal, sign_in_address(requested))
        st.rerun()
