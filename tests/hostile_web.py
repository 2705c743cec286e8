"""Hostile clients of a running dashboard, shared by tests and bench/hostile_inputs.py: a
websocket session opened the way a script (not a browser) would, and a flood of PUTs to
Streamlit's upload endpoint from it.

Nothing here mocks the server: `dashboard` starts `streamlit run serve.py` on a fresh data
directory, `open_session` speaks Streamlit's own protobuf messages over its websocket, and
`flood` sends real multipart PUTs to /_stcore/upload_file/<session>/<file>.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import secrets
import select
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.dashboard import streamlit_argv
from tests.waiting import free_port as _free_port

ROOT = Path(__file__).resolve().parents[1]
XSRF_COOKIE = "_streamlit_xsrf"


@dataclass(frozen=True)
class Dashboard:
    url: str
    process: subprocess.Popen
    log: Path


@contextmanager
def dashboard(data_dir: Path, log: Path) -> Iterator[Dashboard]:
    """`streamlit run serve.py` on loopback with its own data directory, stopped afterwards."""
    port = _free_port()
    env = {**os.environ, "OPTIBOARD_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    env.pop("OPTIBOARD_DATABASE_URL", None)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            streamlit_argv("serve.py", port),
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the dashboard exited: {log.read_text()[-500:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError("the dashboard did not start") from None
                time.sleep(0.3)
        yield Dashboard(url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def rss_mb(pid: int) -> float:
    """Resident memory of a process (the dashboard's server), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass(frozen=True)
class Session:
    """A live Streamlit session: its id, the cookies its websocket was opened with, and whether
    its first run drew the sign-in form (the gate) or a page."""

    session_id: str
    cookies: dict[str, str]
    at_the_gate: bool


def xsrf_cookie(url: str) -> str:
    """Streamlit's XSRF cookie, as any client gets it from a GET of /_stcore/health."""
    with urllib.request.urlopen(url + "/_stcore/health", timeout=10) as response:
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            if name.strip() == XSRF_COOKIE:
                return rest.split(";", 1)[0]
    raise RuntimeError("the dashboard set no XSRF cookie")


def signed_in_cookies(url: str, account: str) -> dict[str, str]:
    """The cookies of a browser where `account` signed in with its password: the one-time
    ticket a sign-in issues, traded for the session cookie (backend/auth/sessions.py) on the
    server's data directory (OPTIBOARD_DATA_DIR of this process)."""
    from backend.auth import returns, sessions

    xsrf = xsrf_cookie(url)
    browser = returns.browser_key(xsrf)
    assert browser is not None
    traded = sessions.trade(sessions.issue_ticket(account, browser), browser)
    assert traded is not None
    return {XSRF_COOKIE: xsrf, sessions.COOKIE: traded.cookie}


async def _open(url: str, cookies: dict[str, str], hold: asyncio.Event, ready: asyncio.Future):
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    header = "; ".join(f"{k}={v}" for k, v in cookies.items())
    protocols = ["streamlit", cookies[XSRF_COOKIE]]
    async with websockets.connect(
        url.replace("http", "ws", 1) + "/_stcore/stream",
        subprotocols=protocols,  # type: ignore[arg-type]
        additional_headers={"Cookie": header, "Origin": url},
        max_size=None,
    ) as ws:
        back = BackMsg()
        back.rerun_script.query_string = ""
        back.rerun_script.page_script_hash = ""
        await ws.send(back.SerializeToString())
        session_id, gate = "", False
        while True:
            raw = await asyncio.wait_for(ws.recv(), timeout=60)
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if kind == "new_session" and not session_id:
                session_id = msg.new_session.initialize.session_id
            gate = gate or (kind == "delta" and b"signin_name" in raw)  # the sign-in form
            if kind == "script_finished" and session_id:
                break
        ready.set_result((session_id, gate))
        await hold.wait()  # the session stays alive while the websocket is open


@contextmanager
def open_session(url: str, cookies: dict[str, str] | None = None) -> Iterator[Session]:
    """A websocket session whose first script run has finished; closed when the block ends."""
    cookies = dict(cookies or {})
    cookies.setdefault(XSRF_COOKIE, xsrf_cookie(url))
    loop = asyncio.new_event_loop()
    hold = asyncio.Event()
    ready: asyncio.Future = loop.create_future()
    task = loop.create_task(_open(url, cookies, hold, ready))
    thread = threading.Thread(target=loop.run_until_complete, args=(task,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 90
    while not ready.done():
        if task.done() and task.exception():
            raise task.exception()  # type: ignore[misc]
        if time.monotonic() > deadline:
            raise TimeoutError("the websocket session did not finish its first run")
        time.sleep(0.05)
    try:
        session_id, gate = ready.result()
        yield Session(session_id, cookies, gate)
    finally:
        loop.call_soon_threadsafe(hold.set)
        thread.join(timeout=10)


def put_file(url: str, session: Session, size: int, name: str = "flood.onnx") -> int:
    """One multipart PUT of `size` bytes to the upload endpoint; the HTTP status."""
    boundary = secrets.token_hex(8)
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + os.urandom(size)
        + f"\r\n--{boundary}--\r\n".encode()
    )
    headers = {
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Content-Length": str(len(body)),
        "X-Xsrftoken": session.cookies[XSRF_COOKIE],
        "Cookie": "; ".join(f"{k}={v}" for k, v in session.cookies.items()),
        "Origin": url,
    }
    where = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    try:
        conn.putrequest("PUT", f"/_stcore/upload_file/{session.session_id}/{secrets.token_hex(8)}")
        for key, value in headers.items():
            conn.putheader(key, value)
        conn.endheaders()
        _send_until_answered(conn.sock, body)
        try:
            return conn.getresponse().status
        except (ConnectionError, http.client.RemoteDisconnected):
            return 0  # the connection dropped without an answer
    finally:
        conn.close()


def _send_until_answered(sock: socket.socket, body: bytes) -> None:
    """The body in chunks, stopping as soon as the server answers: a gate that refuses before
    reading the body answers and closes, and a client still sending would only see a reset."""
    view, sent = memoryview(body), 0
    while sent < len(body):
        if select.select([sock], [], [], 0)[0]:
            return
        try:
            sent += sock.send(view[sent : sent + (1 << 16)])
        except (BrokenPipeError, ConnectionResetError):
            return


def flood(url: str, session: Session, count: int, size: int) -> list[int]:
    """`count` PUTs of `size` bytes each from one session; every status, in order."""
    return [put_file(url, session, size, f"flood{i}.onnx") for i in range(count)]
