"""Uploads into a real `streamlit run serve.py`, from a real Chromium: only signed-in editors may
upload, within a per-session cap, and a refused flood does not grow the server's memory.

Streamlit keeps each PUT to /_stcore/upload_file/<session>/<file> in memory for any session with
an open websocket; before serve.py's UploadGate, 64 x 5 MB from a visitor who never signed in took
the web process from 312 to 634 MB. The test PUTs the way the page's own uploader does (a
multipart form with the XSRF header), from the page, with the session id the server gave it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browsing import chromium, skip_without_chromium
from tests.dashboard import seeding, serve_py
from tests.e2e.test_signin import PASSWORD, _sign_in
from tests.rss import MB, rss_bytes

pytestmark = pytest.mark.e2e

PUT = """async ([url, size]) => {
    const xsrf = document.cookie.split('; ').find(c => c.startsWith('_streamlit_xsrf='));
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(size)]), 'data.npz');
    const answer = await fetch(url, {
        method: 'PUT', body: form, credentials: 'same-origin',
        headers: {'X-Xsrftoken': xsrf ? xsrf.slice('_streamlit_xsrf='.length) : ''},
    });
    return answer.status;
}"""


@dataclass(frozen=True)
class Server:
    url: str
    pid: int


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A dashboard with an editor and a viewer; a session may hold 3 files and 12 MB."""
    skip_without_chromium()
    tmp = tmp_path_factory.mktemp("uploads")
    data_dir = tmp / "data"
    with seeding(data_dir):
        from backend.auth import accounts
        from backend.auth.cli import cli_principal

        for role in ("viewer", "editor"):
            accounts.add_account(cli_principal(), role, role, PASSWORD)
    log = tmp / "streamlit.log"
    caps = {"OPTIBOARD_UPLOAD_SESSION_FILES": "3", "OPTIBOARD_UPLOAD_SESSION_MB": "12"}
    with serve_py(data_dir, log, env=caps, keep_as="e2e-uploads-streamlit.log") as (url, proc):
        yield Server(url, proc.pid)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as browser:
        yield browser


def _open(browser, url: str):  # noqa: ANN001, ANN202 - playwright objects
    """A page at the sign-in form, and the session ids the server gave its websockets, newest
    last (a password sign-in loads the page again, with the cookie: a new session)."""
    from playwright.sync_api import expect
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    found: list[str] = []

    def frames(socket) -> None:  # noqa: ANN001
        def read(payload: bytes | str) -> None:
            if isinstance(payload, bytes):
                message = ForwardMsg()
                message.ParseFromString(payload)
                if message.HasField("new_session") and message.new_session.initialize.session_id:
                    found.append(message.new_session.initialize.session_id)

        socket.on("framereceived", read)

    page = browser.new_context().new_page()
    page.on("websocket", frames)
    page.goto(f"{url}/models")
    expect(page.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(timeout=60_000)
    assert found, "the server sent no session id"
    return page, found


def _put(page, url: str, session_id: str, file_id: str, size: int) -> int:  # noqa: ANN001
    return page.evaluate(PUT, [f"{url}/_stcore/upload_file/{session_id}/{file_id}", size])


def test_a_session_that_never_signed_in_is_refused_and_its_flood_costs_no_memory(
    server: Server,
    browser,  # noqa: ANN001
) -> None:
    page, sessions = _open(browser, server.url)
    session_id = sessions[-1]
    before = rss_bytes(server.pid)
    statuses = {_put(page, server.url, session_id, f"f{i}", 5 * MB) for i in range(64)}
    grown = rss_bytes(server.pid) - before
    assert statuses == {403}
    assert grown < 64 * MB, f"the server grew by {grown / MB:.0f} MB for refused uploads"
    page.context.close()


def test_a_viewer_may_not_upload(server: Server, browser) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    page, sessions = _open(browser, server.url)
    _sign_in(page, "viewer")
    expect(page.get_by_text("Signed in as viewer (viewer)")).to_be_visible(timeout=60_000)
    assert _put(page, server.url, sessions[-1], "f0", 1024) == 403  # the signed-in session
    page.context.close()


def test_an_editor_uploads_within_the_sessions_cap(server: Server, browser) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    page, sessions = _open(browser, server.url)
    _sign_in(page, "editor")
    expect(page.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
    session_id = sessions[-1]  # the session that says "Signed in as"
    put = [(f, size) for f, size in (("a", 5 * MB), ("b", 5 * MB), ("c", 5 * MB))]
    assert [_put(page, server.url, session_id, f, size) for f, size in put] == [204, 204, 413]
    assert _put(page, server.url, session_id, "a", 5 * MB) == 204  # the same file id replaces
    assert _put(page, server.url, session_id, "d", 1024) == 204  # 10 MB + 1 KB in 3 files
    assert _put(page, server.url, session_id, "e", 1024) == 429  # a fourth file
    page.context.close()


def test_an_editor_adds_a_model_through_the_pages_own_uploader(
    server: Server,
    browser,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    """The gate lets the real uploader through: its PUT carries the size and the session id."""
    from playwright.sync_api import expect

    from tests import models as model_factory

    model_file = model_factory.save(model_factory.make_mlp(), tmp_path / "mlp.onnx")
    page, _ = _open(browser, server.url)
    _sign_in(page, "editor")
    expect(page.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
    page.locator("input[type=file]").first.set_input_files(str(model_file))
    expect(page.get_by_text("mlp.onnx").first).to_be_visible(timeout=30_000)
    page.get_by_role("button", name="Add to library").click()
    expect(page.get_by_text("Added mlp")).to_be_visible(timeout=60_000)
    page.context.close()
