"""Optiboard's entry: the page router and the shared sidebar, nothing else."""

from __future__ import annotations

import streamlit as st

import settings
from backend import viewer
from backend.auth.roles import Permission, Via
from backend.queue.jobs import list_workers
from pages import access, signin
from pages.components.widgets import fill_copy_link

st.set_page_config(page_title="Optiboard", page_icon="⚡", layout="wide")
if unread := settings.problems():  # scripts/run checks them first; a server started otherwise
    for problem in unread:
        st.error(problem)
    st.stop()


@st.cache_resource(show_spinner="Preparing the graph viewer…")
def _prepare_viewer() -> str:
    """Copy and patch Netron's static viewer once per server process."""
    return str(viewer.prepare_viewer())


_prepare_viewer()

# Home is the default page, served at /; its url_path only names it (Streamlit keys a page by
# it). /home, where a person may well look for it, is Home too: a hidden page of the same
# script. Otherwise Streamlit answers it with a modal "Page not found" that, before sign-in,
# left the sign-in form beneath it taking no input until it was closed.
PAGES = [
    st.Page("pages/home.py", title="Home", url_path="start", icon="🏠", default=True),
    st.Page("pages/models.py", title="Models", url_path="models", icon="📦"),
    st.Page("pages/graph.py", title="Graph", url_path="graph", icon="🕸️"),
    st.Page("pages/compatibility.py", title="Compatibility", url_path="compatibility", icon="🧩"),
    st.Page("pages/optimize.py", title="Optimize", url_path="optimize", icon="🛠️"),
    st.Page("pages/jobs.py", title="Jobs", url_path="jobs", icon="⏱️"),
    st.Page("pages/serve.py", title="Serve", url_path="serve", icon="🚀"),
    st.Page("pages/compare.py", title="Compare", url_path="compare", icon="📊"),
]
USERS = st.Page("pages/users.py", title="Users", url_path="users", icon="👤")
HOME = st.Page("pages/home.py", title="Home", url_path="home", icon="🏠", visibility="hidden")

principal = access.gate()
if principal is None:  # routed but not run: the address (page + query) survives sign-in
    signin.render(st.navigation([*PAGES, USERS, HOME], position="hidden"))
    st.stop()
if principal.via == Via.LINK:  # a signed link: that comparison, read-only, and nothing else
    # Every page is routed (hidden) so /compare keeps its path; a lone page would be the default,
    # reachable only at /, and /compare would be "Page not found". Only Compare ever runs.
    linked = st.navigation([*PAGES, HOME], position="hidden")
    if linked.url_path != access.LINK_PAGE:
        st.switch_page(PAGES[-1], query_params=st.query_params.to_dict())
    try:
        linked.run()
    finally:
        fill_copy_link()
    st.stop()
admin = principal.can(Permission.USERS)
allowed = [*PAGES, USERS] if admin else PAGES
# Every role has /users routed, hidden from the menu where it may not open it, so its address
# gets the page's own refusal ("This page is for admins ...") instead of "Page not found".
hidden_users = st.Page(
    "pages/users.py", title="Users", url_path="users", icon="👤", visibility="hidden"
)
page = st.navigation([*allowed, HOME] if admin else [*PAGES, hidden_users, HOME])
access.resume_view(principal, allowed)  # the shared link's view, after an identity provider

with st.sidebar:
    workers = list_workers()
    if workers:
        st.success(f"{len(workers)} worker{'s' if len(workers) > 1 else ''} alive", icon="🟢")
    else:
        st.warning("No worker running: start one with `python -m backend.queue.worker`.", icon="🟠")
    access.sign_out_control(principal)
    # No server paths or database addresses here: anyone who can open the page reads the sidebar.

try:
    page.run()
finally:  # even when the page stopped early: the header's link carries what it wrote to the URL
    fill_copy_link()
