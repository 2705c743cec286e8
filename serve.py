"""The server entry (`streamlit run serve.py`): app.py's pages, the two session-cookie routes and
the upload gate.

Streamlit scripts cannot set cookies (they talk over a websocket), so a password sign-in's
HttpOnly cookie is set here, over plain HTTP on the same origin (backend/auth/sessions.py):
- POST START_PATH?ticket=...: trades the one-time ticket the sign-in run issued for the cookie and
  redirects (303) to the address the sign-in came from; the browser comes here itself (a form
  POST, not a fetch), so the page that says "Signed in as" is loaded with the cookie;
- POST END_PATH: signs the cookie's session out and deletes the cookie.
WebSocketOrigin refuses the websocket to pages of any other origin (another port of the same host
included), before Streamlit's own handshake (backend/auth/origins.py).
UploadGate stands in front of Streamlit's /_stcore/upload_file handler, which would otherwise
keep any websocket session's files in memory, signed in or not (backend/auth/uploads.py).
Everything else is Streamlit's own server running app.py, with the same config.toml.
"""

from __future__ import annotations

import html
import re

import streamlit as st
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from streamlit import config as st_config
from streamlit.runtime import Runtime

import settings
from backend.auth import origins, returns, sessions, uploads

XSRF_COOKIE = "_streamlit_xsrf"


def _same_origin(request: Request) -> bool:
    """A cross-site page cannot post here (the browser sends its own Origin)."""
    origin = request.headers.get("origin")
    host = request.headers.get("host")
    return origin is not None and host is not None and origin.split("://", 1)[-1] == host


def _cookie_secure(request: Request) -> bool:
    """The cookie's Secure flag (OPTIBOARD_COOKIE_SECURE). Behind a TLS proxy the request reaches
    Streamlit over plain HTTP, so `auto` also trusts X-Forwarded-Proto: a client that fakes it
    only makes its own browser drop the cookie on plain HTTP."""
    mode = settings.COOKIE_SECURE.get()
    if mode != "auto":
        return mode == "on"
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


def _not_started() -> Response:
    """The page a browser lands on when its ticket is spent, expired or another browser's: a
    sentence and the way back to the form (this is a navigation, not a fetch)."""
    base = str(st_config.get_option("server.baseUrlPath") or "").strip("/")
    home = html.escape(f"/{base}/" if base else "/")
    return HTMLResponse(
        "<!doctype html><title>Optiboard</title><p>This sign-in did not finish: its one-time "
        "ticket expired, was used already or belongs to another browser. "
        f'<a href="{home}">Sign in again</a>.</p>',
        status_code=403,
    )


async def start(request: Request) -> Response:
    if not _same_origin(request):
        return Response(status_code=403)
    browser = returns.browser_key(request.cookies.get(XSRF_COOKIE))
    traded = sessions.trade(request.query_params.get("ticket", ""), browser)
    if traded is None:
        return _not_started()
    response = RedirectResponse(traded.return_to, status_code=303)  # GET the page, cookie set
    response.headers["Cache-Control"] = "no-store"
    response.set_cookie(
        sessions.COOKIE,
        traded.cookie,
        max_age=sessions.lifetime_s(),
        path="/",
        httponly=True,
        samesite="lax",
        secure=_cookie_secure(request),
    )
    return response


async def end(request: Request) -> Response:
    if not _same_origin(request):
        return Response(status_code=403)
    sessions.revoke(request.cookies.get(sessions.COOKIE))
    response = Response(status_code=204)
    response.delete_cookie(
        sessions.COOKIE, path="/", httponly=True, samesite="lax", secure=_cookie_secure(request)
    )
    return response


_UPLOAD_PATH = re.compile(r"/_stcore/upload_file/(?P<session>[^/]+)/(?P<file>[^/]+)/?$")


def _upload_target(scope: Scope) -> tuple[str, str] | None:
    """(session id, file id) of a PUT to Streamlit's upload handler; None for anything else."""
    if scope["type"] != "http" or scope.get("method") != "PUT":
        return None
    found = _UPLOAD_PATH.search(scope.get("path", ""))
    return (found["session"], found["file"]) if found else None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return max(0, int(value))
            except ValueError:
                return None
    return None


def _held(session_id: str) -> dict[str, int]:
    """What Streamlit holds in memory for this session now: file id -> bytes."""
    manager = Runtime.instance().uploaded_file_mgr
    storage = getattr(manager, "file_storage", {})  # MemoryUploadedFileManager's
    files = dict(storage.get(session_id, {}))  # a copy made under the GIL: no lock needed
    return {file_id: len(rec.data) for file_id, rec in files.items()}


class UploadGate:
    """Refuses an upload before a byte of its body is read: 403 unless the session is a signed-in
    editor or admin, 413/429 past the session's bytes/files cap, 411 without a size."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = _upload_target(scope)
        if target is None:
            await self.app(scope, receive, send)
            return
        session_id, file_id = target
        refusal = uploads.reserve(session_id, file_id, _content_length(scope), _held(session_id))
        if refusal is not None:
            answer = PlainTextResponse(uploads.SENTENCES[refusal], status_code=int(refusal))
            await answer(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            uploads.release(session_id, file_id)


_STREAM_PATH = "/_stcore/stream"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


class WebSocketOrigin:
    """Refuses the websocket handshake (403) to any page but the dashboard's own: same scheme,
    host and port (backend/auth/origins.py). Streamlit's own check lets any port of localhost in,
    and cookies reach every port of a host."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and scope.get("path", "").endswith(_STREAM_PATH):
            allowed = origins.websocket_origin_allowed(
                _header(scope, b"origin"),
                _header(scope, b"host"),
                list(st_config.get_option("server.allowedHosts") or []),
                int(st_config.get_option("server.port")),
            )
            if not allowed:
                await receive()  # websocket.connect; closing before accept answers 403
                await send({"type": "websocket.close", "code": 1008})
                return
        await self.app(scope, receive, send)


app = st.App(
    "app.py",
    routes=[
        Route(sessions.START_PATH, start, methods=["POST"]),
        Route(sessions.END_PATH, end, methods=["POST"]),
    ],
    middleware=[Middleware(WebSocketOrigin), Middleware(UploadGate)],
)
