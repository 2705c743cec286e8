"""Who is looking: the sign-in gate app.py runs first, role checks for page actions, signed links.

Backend decides (backend/auth); this module only keeps the answer in the session and draws the
few widgets that belong to access control, so pages need one line per guarded action.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn
from urllib.parse import urlencode, urlsplit

import pandas as pd
import streamlit as st
from streamlit import config as st_config
from streamlit.navigation.page import StreamlitPage
from streamlit.runtime.scriptrunner import get_script_run_ctx

import settings
from backend.auth import accounts, links, returns, sessions, uploads
from backend.auth.audit import Action, audited
from backend.auth.roles import Permission, Principal, Role, Via
from backend.errors import UserError

SESSION_KEY = "optiboard_password_session"  # (sessions.Session, browser key) of a sign-in
PRINCIPAL_KEY = "optiboard_principal"  # who this run acts as, resolved by gate()
SHARE_PARAM = "share"  # the query parameter that carries a signed link's token
LINK_PAGE = "compare"  # the url_path a signed link opens (app.py's Compare page)
MADE_LINK_KEY = "optiboard_made_link"  # (job ids, url) of the link an editor made last
TICKET_KEY = "optiboard_session_ticket"  # set by a password sign-in; the browser trades it
LAPSED_KEY = "optiboard_sign_in_lapsed"  # the last sign-in's ticket was never traded in this tab
SIGNED_OUT_KEY = "optiboard_signed_out"  # the next run deletes the session cookie
XSRF_COOKIE = "_streamlit_xsrf"  # Streamlit's; its token identifies the browser (returns.py)
OPEN = Principal("anyone", Role.ADMIN, Via.OPEN)


def oidc_configured() -> bool:
    """True when secrets.toml has an [auth] section, so st.login can reach an identity provider."""
    return st.secrets.load_if_toml_exists() and "auth" in st.secrets


def _resolve() -> Principal | None:
    """The principal for this run, or None when sign-in is needed; a bad link raises LinkError."""
    if not settings.AUTH.get():
        return OPEN
    token = st.query_params.get(SHARE_PARAM)
    if token:
        return links.verify(token).principal()
    session = _password_session()
    if session is not None:
        return accounts.principal_for(session.name)  # its role as the database says now
    if oidc_configured() and st.user.get("is_logged_in"):
        try:
            return accounts.oidc_principal(st.user.to_dict()) or _no_role()
        except accounts.SignInError as exc:  # the provider did not verify the e-mail
            return _no_role(str(exc))
    return None


def _password_session() -> sessions.Session | None:
    """This run's password session, checked again on every run (sessions.live), never trusted
    from an earlier run: a sign-out elsewhere, a new password or role, or a removal ends it here.

    The session this tab signed in with is kept with the browser it was made in (its XSRF
    token's key), so Streamlit's session id alone (a reconnecting websocket names it) opens
    nothing in another browser; otherwise the cookie the websocket came with is checked."""
    browser = returns.browser_key(st.context.cookies.get(XSRF_COOKIE))
    held = st.session_state.get(SESSION_KEY)
    if held is not None and held[1] == browser and sessions.live(held[0]):
        return held[0]
    st.session_state.pop(SESSION_KEY, None)
    if st.session_state.get(SIGNED_OUT_KEY):
        return None
    session = sessions.verify(st.context.cookies.get(sessions.COOKIE))
    if session is not None:
        st.session_state[SESSION_KEY] = (session, browser)
    return session


NO_ROLE = "Your sign-in worked but no role is given to you here; ask an admin for an account."


def _no_role(why: str = NO_ROLE) -> None:
    st.error(why)
    if st.button("Sign out"):
        st.logout()
    st.stop()


def gate(sync_cookie: bool = True) -> Principal | None:
    """Resolve who is looking and remember it for this run; None: show the sign-in form.
    `sync_cookie`: also post a sign-out's cookie deletion, as app.py's call does once per run."""
    try:
        principal = _resolve()
    except UserError as exc:
        _record_upload_rights(None)
        st.error(str(exc), icon="🔒")
        st.stop()
    st.session_state[PRINCIPAL_KEY] = principal
    _record_upload_rights(principal)
    if sync_cookie:
        _sync_session_cookie()
    return principal


def _record_upload_rights(principal: Principal | None) -> None:
    """Tell serve.py's upload gate who this browser session is now (backend/auth/uploads.py)."""
    ctx = get_script_run_ctx()
    if ctx is not None:
        uploads.record(ctx.session_id, principal)


def _post(path: str) -> None:
    """A same-origin POST from the page, so the answer's Set-Cookie lands in this browser."""
    st.html(
        f"<script>fetch({json.dumps(path)}, {{method: 'POST', credentials: 'same-origin'}})"
        "</script>",
        unsafe_allow_javascript=True,
    )


def _sync_session_cookie() -> None:
    """After a sign-out, delete the session cookie (serve.py's END_PATH). The session is already
    ended on the server (sessions.end), so a cookie that outlives this post is refused anyway."""
    if st.session_state.pop(SIGNED_OUT_KEY, None):
        _post(sessions.END_PATH)


def _go_post(path: str, once: str) -> None:
    """Send this tab to `path` by a same-origin form POST: a navigation, not a fetch, so the
    answer's Set-Cookie is stored before the page it redirects to loads. `once` guards against
    a redrawn element submitting again (a second POST would find the ticket spent)."""
    st.html(
        "<script>(() => {"
        f"if (window.optiboardGoing === {json.dumps(once)}) return;"
        f"window.optiboardGoing = {json.dumps(once)};"
        "const form = document.createElement('form');"
        f"form.method = 'post'; form.action = {json.dumps(path)};"
        "document.body.appendChild(form); form.submit();"
        "})()</script>",
        unsafe_allow_javascript=True,
    )


def finishing_sign_in() -> bool:
    """True while this tab's password sign-in is on its way to the session cookie: the tab is
    sent to serve.py's START_PATH, which sets the cookie and loads the page it came from, where
    the run that says "Signed in as" has read that cookie. Until then this tab is not signed in.

    A ticket that lapses untraded (60 s: the browser never got there) is dropped and
    `sign_in_lapsed` says so once, above the form."""
    ticket = st.session_state.get(TICKET_KEY)
    if ticket is None:
        return False
    if sessions.ticket_pending(ticket):
        _go_post(f"{sessions.START_PATH}?{urlencode({'ticket': ticket})}", once=ticket)
        return True
    st.session_state.pop(TICKET_KEY, None)
    st.session_state[LAPSED_KEY] = True
    return False


def sign_in_lapsed() -> bool:
    """Whether the last sign-in in this tab never reached its cookie (asked once)."""
    return bool(st.session_state.pop(LAPSED_KEY, False))


def current() -> Principal:
    """The principal gate() resolved; nobody reaches a page without one."""
    principal = st.session_state.get(PRINCIPAL_KEY)
    if principal is None:
        _through_the_gate()
    return principal


def _through_the_gate() -> NoReturn:
    """A page ran without app.py (Streamlit's legacy pages/ mode): rerun it through the gate.

    Streamlit runs a pages/ file on its own until the entry file has once called st.navigation;
    components.ensure_router handles that once per process, this catches every other case.
    """
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = False
    st.rerun()


def can(permission: Permission) -> bool:
    return current().can(permission)


def who_may(permission: Permission) -> str:
    """The roles that have `permission`, in words: "editors and admins"."""
    names = [f"{r.value}s" for r in Role if Principal("", r, Via.PASSWORD).can(permission)]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def cannot(action: str, permission: Permission) -> str | None:
    """The sentence beside a control this role may not use (None: it may), naming what it
    cannot do and who can: a greyed-out button alone does not say why."""
    principal = current()
    if principal.can(permission):
        return None
    if principal.via == Via.LINK:
        return f"A read-only link cannot {action}; {who_may(permission)} can, once signed in."
    return f"Your role ({principal.role.value}) cannot {action}; {who_may(permission)} can."


@contextmanager
def guarded(action: Action, target: str = "", **detail: Any) -> Iterator[int]:
    """Role check plus audit entry around one page action: `with guarded(Action.DELETE, ...):`."""
    with audited(current(), action, target, **detail) as entry:
        yield entry


def signed_in(principal: Principal, return_to: str) -> None:
    """Start a password sign-in: a one-time ticket that the next run sends the browser to trade
    for the session cookie (finishing_sign_in), coming back to `return_to` (sign_in_address).
    This tab is not signed in before that: had it been, it said "Signed in as" while the cookie
    did not exist yet, and a link opened or a reload in that time asked to sign in again.

    A browser without Streamlit's XSRF cookie cannot be told apart from another (no ticket can
    be bound to it), so it gets no cookie and the sign-in holds in this tab only, at once."""
    session = sessions.begin(principal.name)
    if session is None:
        return
    st.session_state.pop(SIGNED_OUT_KEY, None)
    st.session_state.pop(LAPSED_KEY, None)
    browser = returns.browser_key(st.context.cookies.get(XSRF_COOKIE))
    if browser:
        ticket = sessions.issue_ticket(session, browser, return_to=return_to)
        st.session_state[TICKET_KEY] = ticket
    else:
        st.session_state[SESSION_KEY] = (session, browser)


def sign_in_address(requested: StreamlitPage | None) -> str:
    """The address a password sign-in comes back to: the page and query this tab shows (a
    shared link's view), as a path on this site. `requested` is the routed page; None (a page
    drew the form itself) takes the path the browser reported (st.context.url)."""
    base = str(st_config.get_option("server.baseUrlPath") or "").strip("/")
    prefix = f"/{base}" if base else ""
    if requested is not None:
        path = f"{prefix}/{requested.url_path}"  # the default page's url_path is ""
    else:
        path = urlsplit(st.context.url or "").path or f"{prefix}/"
    pairs = [(k, v) for k in st.query_params.to_dict() for v in st.query_params.get_all(k)]
    return f"{path}?{urlencode(pairs)}" if pairs else path


def remember_view(page: StreamlitPage) -> None:
    """Before st.login: remember the view this browser came for, as the provider's round trip
    ends on the app's root (backend/auth/returns.py)."""
    key = returns.browser_key(st.context.cookies.get(XSRF_COOKIE))
    query = {k: st.query_params.get_all(k) for k in st.query_params.to_dict()}
    if key and (query or page.url_path):  # the default page's url_path is ""
        returns.remember(key, returns.Target(page.url_path, query))


def resume_view(principal: Principal, pages: list[StreamlitPage]) -> None:
    """After an identity-provider sign-in: open the view remembered before it (once)."""
    if principal.via != Via.OIDC:
        return
    key = returns.browser_key(st.context.cookies.get(XSRF_COOKIE))
    target = returns.take(key) if key else None
    page = next((p for p in pages if target and p.url_path == target.page), None)
    if page is not None and target is not None:
        st.switch_page(page, query_params=target.query)


def sign_out_control(principal: Principal) -> None:
    """The sidebar's who-am-I line and sign-out button."""
    if principal.via == Via.OPEN:
        st.caption("Access control is off (OPTIBOARD_AUTH=off).")
        return
    st.text(f"Signed in as {principal.name} ({principal.role.value})")  # text: no markdown
    if st.button("Sign out", key="sign_out"):
        held = st.session_state.pop(SESSION_KEY, None)
        st.session_state.pop(PRINCIPAL_KEY, None)
        accounts.signed_out(principal)  # audited
        if held is not None:  # every tab of this sign-in, the cookie's included, ends
            sessions.end(held[0])
        sessions.revoke(st.context.cookies.get(sessions.COOKIE))
        st.session_state[SIGNED_OUT_KEY] = True
        if principal.via == Via.OIDC:
            st.logout()  # clears Streamlit's identity cookie, then the provider's session
            # st.logout only queues the browser's redirect to the provider's end_session; a
            # rerun started later in this run (the page asking who is looking) dropped it
            # when the host was loaded, leaving the user signed in at the provider
            st.stop()
        else:
            st.rerun()


def link_scope(frame: pd.DataFrame, column: str = "job_id") -> pd.DataFrame:
    """Under a signed link only the jobs it names; everyone else sees every row."""
    jobs = current().jobs
    return frame if jobs is None else frame[frame[column].isin(jobs)]


def signed_link_control(job_ids: list[int]) -> None:
    """For editors: a signed, expiring, read-only link to this comparison (no account needed).

    The made link is kept in the session and shown above the popover's button, not in it: the
    click's rerun may close the popover, and the link must stay in sight until it is copied. Under
    the button, the open popover (it stays open) covered the link it had just made."""
    if not can(Permission.SHARE) or current().via == Via.OPEN:
        return
    above = st.container()  # filled after the button: the link is made inside the popover
    with st.popover("🔏 Read-only link", help="A link for someone without an account"):
        longest = settings.LINK_MAX_DAYS.get()
        days = st.number_input(  # "7", not "7.00": a day count, a fraction where typed
            "Valid for (days)", 0.1, longest, min(7.0, longest), 1.0, "%g", key="link_days"
        )
        if st.button("Make link", key="make_link"):
            try:
                token = links.create_link(current(), tuple(job_ids), float(days))  # audited
            except UserError as exc:
                st.error(str(exc), icon="🚫")
                return
            query = {k: st.query_params.get(k) for k in st.query_params.to_dict()}
            query[SHARE_PARAM] = token
            url = f"{links_base_url()}/{LINK_PAGE}?{urlencode(query)}"
            st.session_state[MADE_LINK_KEY] = (tuple(job_ids), url)
    made = st.session_state.get(MADE_LINK_KEY)
    if made is not None and made[0] == tuple(job_ids):  # a link to what is on screen only
        above.code(made[1], language=None, wrap_lines=True)
        above.caption("Anyone with this link sees these jobs read-only until it expires.")


def links_base_url() -> str:
    """scheme://host[:port][/base path] of this dashboard, from the address the browser opened
    (whatever page that was: a link always names the Compare page itself)."""
    parts = urlsplit(st.context.url or "")
    base = str(st_config.get_option("server.baseUrlPath") or "").strip("/")
    return f"{parts.scheme}://{parts.netloc}" + (f"/{base}" if base else "")
