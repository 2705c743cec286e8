"""The first line of every page module: nothing is drawn, read or served before access is checked.

app.py checks access before it routes, but a page must not rely on that: in Streamlit's legacy
pages/ mode (the first requests after a server start, see router.py) a page runs without app.py,
and concurrent first visitors used to get Home, Graph (with its model's /media URL) and
Compatibility (with downloads) that way. So each page resolves who is looking itself, on every
run (pages/access.gate re-checks the session each time), and stops when that person may not
see it: nobody signed in reruns through app.py (its sign-in form), or gets the form here when the
page is the main script itself; a role or link that may not open the page gets a refusal.
"""

from __future__ import annotations

import streamlit as st

from backend.auth.roles import Permission, Principal, Via
from pages import access, signin

_REROUTED_KEY = "optiboard_gate_rerouted"  # this session's page already reran to reach app.py


def require_access(permission: Permission = Permission.BROWSE) -> Principal:
    """The principal of this run when it may `permission`; otherwise draw the sign-in form (no
    one signed in) or a refusal, and stop the run before the page draws anything."""
    principal = access.gate(sync_cookie=False)  # app.py's gate posts a sign-out, once a run
    if principal is None:
        if not st.session_state.pop(_REROUTED_KEY, False):
            # Rerun through app.py, whose form is the one to fill in: a form drawn by a page
            # run on its own would lose its first click, as the rerun is routed differently.
            st.session_state[_REROUTED_KEY] = True
            _route_next_runs()
            st.rerun()
        signin.render(None)  # still not routed (the page is the main script): the form here
        st.stop()
    st.session_state.pop(_REROUTED_KEY, None)
    if not principal.can(permission):
        if principal.via == Via.LINK:
            st.error("This read-only link opens only its comparison.", icon="🔒")
        else:
            st.error(  # who it is for, so a link to it is not mistaken for a broken one
                f"This page is for {access.who_may(permission)}: your role "
                f"({principal.role.value}) may not open this page; ask an admin.",
                icon="🔒",
            )
        st.stop()
    return principal


def _route_next_runs() -> None:
    """Leave legacy pages/ mode so the next run (after sign-in) goes through app.py's router."""
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = False
