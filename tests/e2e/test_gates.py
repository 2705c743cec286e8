"""Gates that a real browser must not pass (issue 21, items 8-10), on a real `streamlit run
serve.py` and real Chromium:
- in a fresh server's first seconds, many cookieless visitors at once, on every page address,
  get the sign-in form and nothing else (no model's /media URL, no download);
- a page served from another port of the same host cannot open the dashboard's websocket, though
  the admin's cookies reach that port too; a raw handshake with such an Origin gets 403;
- a sign-out in one tab ends the other tabs of that sign-in at their next run.
"""

from __future__ import annotations

import http.server
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.browsing import chromium, serving, skip_without_chromium
from tests.dashboard import seeding, serve_py
from tests.e2e.test_signin import PASSWORD, _settled, _sign_in

# Home is the default page, at the root (/home is a hidden alias of it, app.py). The root
# comes last: app.py runs there even in legacy mode and its st.navigation ends that mode.
PAGES = ("graph", "compatibility", "jobs", "optimize", "models", "serve", "compare", "users", "")
VISITORS_PER_PAGE = 2  # 18 at once still race the first seconds; 27 took 58 s, the slowest
pytestmark = pytest.mark.e2e


@contextmanager
def _server(data_dir: Path, name: str) -> Iterator[str]:
    """A fresh dashboard process on data_dir; its log lands in test-artifacts/."""
    log = data_dir.parent / f"{name}.log"
    with serve_py(data_dir, log, keep_as=f"e2e-gates-{name}.log") as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One Chromium for the module: each test opens its own contexts (own cookies, own cache)
    and closes them, so a launch per test (about 1 CPU-s each) bought nothing."""
    skip_without_chromium()
    with chromium() as browser:
        yield browser


def _is_media(url: str) -> bool:
    """Streamlit's media store (a model handed to the viewer), not the app's own fonts."""
    return urlsplit(url).path.startswith("/media/")


def _accounts() -> None:
    from backend.auth import accounts
    from backend.auth.cli import cli_principal

    accounts.add_account(cli_principal(), "root", "admin", PASSWORD)
    accounts.add_account(cli_principal(), "editor", "editor", PASSWORD)


def test_cookieless_visitors_in_a_fresh_servers_first_seconds_get_only_the_sign_in_form(
    data_dir: Path,
    mlp_path: Path,
    browser,  # noqa: ANN001
) -> None:
    from playwright.sync_api import expect

    from backend.specs import SweepSpec
    from tests.pages.seed import add_job, add_model

    _accounts()
    model = add_model(mlp_path, "secret-model")
    add_job(model.id, SweepSpec(), label="secret-job")
    media: list[str] = []
    with _server(data_dir, "first-seconds") as url:
        visits = [(p, browser.new_context().new_page()) for p in PAGES * VISITORS_PER_PAGE]
        for path, page in visits:  # every address, several visitors each, all loading at once
            page.on("response", lambda r: media.append(r.url) if _is_media(r.url) else None)
            page.goto(f"{url}/{path}?model={model.id}&job=1&jobs=1", wait_until="commit")
        for path, page in visits:
            expect(page.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(
                timeout=90_000
            )
            _settled(page)
            headings = [h.strip() for h in page.get_by_role("heading").all_inner_texts()]
            body = page.locator("body").inner_text()
            assert headings == ["Sign in to Optiboard"], (path, headings)
            assert "secret-model" not in body and "secret-job" not in body, path
            assert "worker" not in body.lower(), path  # no sidebar, no Home overview
            assert page.locator("[data-testid=stDownloadButton]").count() == 0, path
            page.context.close()
    assert media == []


def _handshake(url: str, origin: str | None) -> int:
    """The HTTP status of a websocket handshake to the dashboard's stream, with this Origin."""
    host_port = url.split("://", 1)[1]
    host, port = host_port.split(":")
    lines = [
        "GET /_stcore/stream HTTP/1.1",
        f"Host: {host_port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Protocol: streamlit",
    ]
    if origin is not None:
        lines.append(f"Origin: {origin}")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        status_line = sock.recv(4096).split(b"\r\n", 1)[0].decode()
    return int(status_line.split()[1])


OTHER_PORT_PAGE = """<!doctype html><title>elsewhere</title><script>
const xsrf = (document.cookie.split('; ').find(c => c.startsWith('_streamlit_xsrf=')) || '=')
  .split('=')[1];
const ws = new WebSocket('WS_URL', ['streamlit', xsrf]);
window.outcome = new Promise(done => {
  ws.onopen = () => done('open'); ws.onerror = () => done('refused');
  ws.onclose = () => done('refused');
});
</script>"""


@contextmanager
def _other_port_site(dashboard: str) -> Iterator[str]:
    """Another web server on the same host (another port) serving a page that opens the
    dashboard's websocket with whatever cookies the browser holds for the host."""
    body = OTHER_PORT_PAGE.replace("WS_URL", dashboard.replace("http", "ws") + "/_stcore/stream")

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    with serving(Page) as url:
        yield url


@pytest.fixture(scope="module")
def accounts_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One dashboard with the two accounts, for the tests that need no fresh server (the
    websocket's Origin check, a sign-out across tabs): each signs in its own browser context,
    so neither sees the other's sessions. The first-seconds test and the live-tab test (a
    queued job keeps Home refreshing) start their own."""
    data_dir = tmp_path_factory.mktemp("gates") / "data"
    data_dir.mkdir(mode=0o700)
    with seeding(data_dir):
        _accounts()
    with _server(data_dir, "accounts") as url:
        yield url


def test_a_page_from_another_port_cannot_open_the_websocket(
    accounts_server: str,
    browser,  # noqa: ANN001
) -> None:
    from playwright.sync_api import expect

    url = accounts_server
    port = url.rsplit(":", 1)[1]
    assert _handshake(url, url) == 101  # the dashboard's own page
    assert _handshake(url, f"http://localhost:{port}") == 101  # a listed host, same port
    assert _handshake(url, None) == 101  # a program: its own cookies only
    for foreign in ("http://127.0.0.1:9", "http://localhost:9", f"https://evil.test:{port}"):
        assert _handshake(url, foreign) == 403, foreign
    assert _handshake(url, "null") == 403  # a sandboxed frame or a file

    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{url}/users")
    _sign_in(page, "root")
    expect(page.get_by_text("Signed in as root (admin)")).to_be_visible(timeout=60_000)
    with _other_port_site(url) as elsewhere:
        other = context.new_page()  # the same browser: the admin's cookies reach any port
        other.goto(elsewhere)
        assert other.evaluate("window.outcome") == "refused"
    mine = context.new_page()  # the dashboard itself still connects in that browser
    mine.goto(url)
    expect(mine.get_by_text("Signed in as root (admin)")).to_be_visible(timeout=60_000)
    context.close()


def test_signing_out_in_one_tab_ends_the_other_tabs_at_their_next_run(
    accounts_server: str,
    browser,  # noqa: ANN001
) -> None:
    from playwright.sync_api import expect

    url = accounts_server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    first = context.new_page()
    first.goto(f"{url}/jobs")
    _sign_in(first, "editor")
    expect(first.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
    second = context.new_page()  # signed in by the cookie the first tab's sign-in set
    second.goto(f"{url}/models")
    expect(second.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
    second.get_by_role("button", name="Sign out").click()
    expect(second.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(timeout=60_000)
    _settled(first)
    first.get_by_role("link", name="Models").click()  # a rerun of the first tab's session
    expect(first.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(timeout=60_000)
    _settled(first)
    assert first.get_by_text("Signed in as editor").count() == 0
    context.close()


def test_a_live_tab_left_alone_ends_at_its_next_refresh_after_a_sign_out_elsewhere(
    data_dir: Path,
    mlp_path: Path,
    browser,  # noqa: ANN001
) -> None:
    """Home's overview refreshes itself while work is queued; its timed fragment reruns skip the
    page's first line, so the fragment checks access too: with no click in the first tab, its
    next refresh after the sign-out elsewhere shows the sign-in form instead of the queue."""
    from playwright.sync_api import expect

    from backend.specs import SweepSpec
    from tests.pages.seed import add_job, add_model

    _accounts()
    model = add_model(mlp_path, "live-model")
    add_job(model.id, SweepSpec(), label="queued-job")  # no worker: it stays queued, Home is live
    with _server(data_dir, "live-tab") as url:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        first = context.new_page()
        first.goto(f"{url}/")
        _sign_in(first, "editor")
        expect(first.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
        expect(first.get_by_text("queued-job").first).to_be_attached(timeout=60_000)  # a grid cell
        second = context.new_page()
        second.goto(f"{url}/models")
        expect(second.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
        second.get_by_role("button", name="Sign out").click()
        expect(second.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(
            timeout=60_000
        )
        # no click, no reload in the first tab: only its fragment's own refresh runs
        expect(first.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(
            timeout=30_000
        )
        # the queue's cells go once that run ends (Streamlit clears stale elements at its end)
        expect(first.get_by_text("queued-job")).to_have_count(0, timeout=30_000)
        context.close()
