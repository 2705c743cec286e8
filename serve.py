"""The server entry (`streamlit run serve.py`): app.py's pages plus the two session-cookie routes.

Streamlit scripts cannot set cookies (they talk over a websocket), so a password sign-in's
HttpOnly cookie is set here, over plain HTTP on the same origin (backend/auth/sessions.py):
- POST START_PATH?ticket=...: trades the one-time ticket the sign-in run issued for the cookie;
- POST END_PATH: signs the cookie's session out and deletes the cookie.
Everything else is Streamlit's own server running app.py, with the same config.toml.
"""

from __future__ import annotations

import streamlit as st
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from backend.auth import returns, sessions

XSRF_COOKIE = "_streamlit_xsrf"


def _same_origin(request: Request) -> bool:
    """A cross-site page cannot post here (the browser sends its own Origin)."""
    origin = request.headers.get("origin")
    host = request.headers.get("host")
    return origin is not None and host is not None and origin.split("://", 1)[-1] == host


async def start(request: Request) -> Response:
    if not _same_origin(request):
        return Response(status_code=403)
    browser = returns.browser_key(request.cookies.get(XSRF_COOKIE))
    cookie = sessions.redeem(request.query_params.get("ticket", ""), browser)
    if cookie is None:
        return Response(status_code=403)
    response = Response(status_code=204)
    response.set_cookie(
        sessions.COOKIE,
        cookie,
        max_age=sessions.lifetime_s(),
        path="/",
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return response


async def end(request: Request) -> Response:
    if not _same_origin(request):
        return Response(status_code=403)
    sessions.revoke(request.cookies.get(sessions.COOKIE))
    response = Response(status_code=204)
    response.delete_cookie(sessions.COOKIE, path="/", httponly=True, samesite="lax")
    return response


app = st.App(
    "app.py",
    routes=[
        Route(sessions.START_PATH, start, methods=["POST"]),
        Route(sessions.END_PATH, end, methods=["POST"]),
    ],
)
