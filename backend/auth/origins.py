"""Whose page may open the dashboard's websocket: only the dashboard's own origin.

Streamlit admits a websocket whose Origin names the same host as the request, or any origin on a
host of its own list (localhost, 127.0.0.1, the machine's addresses) on *any port*, and cookies do
not tell ports apart. So a page served from another port of the same host (another developer's
tool, a notebook, a one-line http.server) could open the websocket with the admin's cookie, read
the Users page and add an admin. serve.py asks `websocket_origin_allowed` at the handshake and
refuses everything else with 403 before Streamlit sees the connection.
"""

from __future__ import annotations

from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _host_port(netloc: str, scheme: str) -> tuple[str, int] | None:
    """(lower-case host name, port) of a netloc, the scheme's port when none is written."""
    try:
        parts = urlsplit(f"//{netloc}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.password is not None:
        return None
    return parts.hostname.lower().rstrip("."), port or _DEFAULT_PORTS[scheme]


def _host_listed(hostname: str, allowed_hosts: list[str]) -> bool:
    """server.allowedHosts' patterns: a name, `*.domain` or `*`."""
    for pattern in (h.strip().lower().strip("[]").rstrip(".") for h in allowed_hosts):
        if pattern == "*" or hostname == pattern:
            return True
        if pattern.startswith("*.") and hostname.endswith(pattern[1:]):
            return True
    return False


def websocket_origin_allowed(
    origin: str | None, host: str | None, allowed_hosts: list[str], port: int
) -> bool:
    """True for the dashboard's own pages: an Origin whose scheme is http(s) and whose host and
    port are the request's Host (the address the browser opened), or a host of allowed_hosts
    (server.allowedHosts: loopback and OPTIBOARD_ALLOWED_HOSTS) on the dashboard's port.

    No Origin at all is a program, not a page (browsers always send it on a websocket); it only
    gets what its own cookies give it, so it is left to Streamlit's checks."""
    if origin is None:
        return True
    parts = urlsplit(origin.strip())
    if parts.scheme not in _DEFAULT_PORTS or parts.path not in ("", "/") or parts.query:
        return False
    theirs = _host_port(parts.netloc, parts.scheme)
    if theirs is None:
        return False
    if host is not None and _host_port(host, parts.scheme) == theirs:
        return True
    return theirs[1] == port and _host_listed(theirs[0], allowed_hosts)
