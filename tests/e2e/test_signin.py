"""Sign-in in a real Chromium against a real `streamlit run`, with a real OIDC provider.

The provider is oidc-provider-mock from PyPI, started as its own server; Streamlit's st.login talks
to it over HTTP (AUTHLIB_INSECURE_TRANSPORT, for this loopback test only). Accounts, jobs and
results are seeded into the server's data directory through the real backend and storage.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests import models as model_factory
from tests.browsing import chromium, skip_without_chromium
from tests.dashboard import ARTIFACTS, seeding, stop_and_keep_logs, streamlit_argv
from tests.dashboard import wait_healthy as _wait_healthy
from tests.e2e.test_browser import _legend
from tests.waiting import free_port as _free_port

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery"
# A name that resolves to the dashboard, as a DNS-rebinding attacker's page would.
REBIND_RULE = "--host-resolver-rules=MAP rebind.test 127.0.0.1"
pytestmark = pytest.mark.e2e
# The one provider user whose e-mail the provider vouches for (email_verified): it names an account.
VERIFIED_LEAD = {"sub": "lead@example.com", "email": "lead@example.com", "email_verified": True}


@dataclass(frozen=True)
class Dashboard:
    url: str
    job_id: int
    data_dir: Path
    log: Path  # the server's output


def _wait_for_provider(url: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the OIDC provider exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/.well-known/openid-configuration", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError("the OIDC provider did not start")


def _seed(data_dir: Path, tmp: Path) -> int:
    """One finished sweep with results, then accounts (the first admin through the CLI). The
    sweep comes first: from an empty data directory it is the step test_signed_link seeds too,
    so the run's store of seeding steps (tests/pages/stored.py) copies it instead of running
    the worker again; no account takes part in an ingest or a worker run."""
    with seeding(data_dir):
        from backend.auth import accounts
        from backend.auth.cli import cli_principal
        from tests.pages.seed import add_model, finished_sweep

        model_path = model_factory.save(model_factory.make_mlp(), tmp / "mlp.onnx")
        job, _ = finished_sweep(add_model(model_path, "mlp").id)
        made = subprocess.run(
            [sys.executable, "-m", "backend.cli", "users", "add", "root", "--role", "admin"]
            + ["--password-stdin"],
            cwd=ROOT,
            input=PASSWORD + "\n",
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert made.returncode == 0, made.stderr
        for role in ("viewer", "editor"):
            accounts.add_account(cli_principal(), role, role, PASSWORD)
        accounts.add_account(cli_principal(), "lead@example.com", "editor", None)
    return job.id


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """One Streamlit server with built-in accounts and an [auth] section for the OIDC provider."""
    skip_without_chromium()
    tmp = tmp_path_factory.mktemp("signin")
    data_dir = tmp / "data"
    job_id = _seed(data_dir, tmp)
    port, idp_port = _free_port(), _free_port()
    url, idp = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{idp_port}"
    secrets_file = tmp / "secrets.toml"
    secrets_file.write_text(
        "[auth]\n"
        f'redirect_uri = "{url}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_hex(32)}"\n'
        'client_id = "optiboard"\n'
        f'client_secret = "{secrets.token_hex(16)}"\n'
        f'server_metadata_url = "{idp}/.well-known/openid-configuration"\n'
    )
    env = {**os.environ, "OPTIBOARD_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    env["AUTHLIB_INSECURE_TRANSPORT"] = "1"  # the provider speaks plain HTTP on loopback
    env.pop("OPTIBOARD_DATABASE_URL", None)
    env.pop("OPTIBOARD_AUTH", None)
    logs = tmp / "logs"
    logs.mkdir()
    provider = subprocess.Popen(
        [sys.executable, "-m", "oidc_provider_mock", "--port", str(idp_port)]
        + ["--user-claims", json.dumps(VERIFIED_LEAD)],  # others get no email_verified: refused
        env=env,
        stdout=open(logs / "oidc.log", "wb"),  # noqa: SIM115 - closed with the process
        stderr=subprocess.STDOUT,
    )
    server = subprocess.Popen(
        streamlit_argv("serve.py", port, "--secrets.files", str(secrets_file)),
        cwd=ROOT,
        env=env,
        stdout=open(logs / "streamlit.log", "wb"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_provider(idp, provider)
        _wait_healthy(url, server)
        yield Dashboard(url, job_id, data_dir, logs / "streamlit.log")
    finally:
        stop_and_keep_logs([server, provider], logs, "e2e-signin-")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium(REBIND_RULE) as browser:
        yield browser


def _page(browser):  # noqa: ANN001, ANN202 - playwright objects
    return browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()


def _sign_in(page, name: str, password: str = PASSWORD) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    expect(page.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(timeout=60_000)
    page.get_by_role("textbox", name="Account").fill(name)
    page.get_by_role("textbox", name="Password").fill(password)
    page.get_by_role("button", name="Sign in", exact=True).click()


def _settled(page) -> None:  # noqa: ANN001
    """Wait until the script run has finished, so an absent widget is really absent."""
    page.wait_for_selector("[data-test-script-state=notRunning]", timeout=60_000)
    page.wait_for_timeout(500)  # let the last deltas paint
    page.wait_for_selector("[data-test-script-state=notRunning]", timeout=60_000)


def test_roles_limit_what_each_account_sees(dashboard: Dashboard, browser) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    seen: dict[str, dict[str, bool]] = {}
    for name in ("viewer", "editor", "root"):
        page = _page(browser)
        page.goto(f"{dashboard.url}/models?model=1")
        _sign_in(page, name)
        expect(page.get_by_text(f"Signed in as {name}")).to_be_visible(timeout=60_000)
        expect(page.get_by_role("heading", name="Models")).to_be_visible()
        _settled(page)
        panels = page.locator("[data-testid=stExpander]")  # the controls, not the sentences
        seen[name] = {  # that say why a role has none ("... cannot upload a model; ...")
            "upload": panels.filter(has_text="Upload a model").count() > 0,
            "delete": panels.filter(has_text="Delete this model").count() > 0,
            "users": page.get_by_role("link", name="Users").count() > 0,
        }
        if name == "viewer":
            expect(page.get_by_text("Your role (viewer) cannot upload a model")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / f"e2e-signin-{name}.png"), full_page=True)
        page.context.close()
    assert seen == {
        "viewer": {"upload": False, "delete": False, "users": False},
        "editor": {"upload": True, "delete": False, "users": False},
        "root": {"upload": True, "delete": True, "users": True},
    }


def test_the_users_address_tells_an_editor_it_is_for_admins(
    dashboard: Dashboard,
    browser,  # noqa: ANN001
) -> None:
    """Not Streamlit's "Page not found" (the page was left out of an editor's navigation): the
    page's own sentence, with the page still absent from the menu."""
    from playwright.sync_api import expect

    page = _page(browser)
    page.goto(f"{dashboard.url}/users")
    _sign_in(page, "editor")
    sentence = "This page is for admins: your role (editor) may not open this page; ask an admin."
    expect(page.get_by_text(sentence)).to_be_visible(timeout=60_000)
    _settled(page)
    assert "Page not found" not in page.locator("body").inner_text()
    assert page.get_by_role("link", name="Users").count() == 0
    page.context.close()


def test_a_password_sign_in_survives_a_reload_and_a_new_tab_until_sign_out(
    dashboard: Dashboard,
    browser,  # noqa: ANN001
) -> None:
    """The session cookie: signed, HttpOnly, expiring; signing out ends it, even for a copy."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(f"{dashboard.url}/jobs")
    _sign_in(page, "editor")
    expect(page.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
    deadline = time.monotonic() + 30
    while not [c for c in context.cookies() if c["name"] == "optiboard_session"]:
        assert time.monotonic() < deadline, "no session cookie was set"
        page.wait_for_timeout(200)
    (cookie,) = [c for c in context.cookies() if c["name"] == "optiboard_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax" and cookie["path"] == "/"
    hours = (cookie["expires"] - time.time()) / 3600
    assert 11.9 < hours <= 12.0  # OPTIBOARD_SESSION_HOURS' default

    page.reload()
    expect(page.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    tab = context.new_page()
    tab.goto(f"{dashboard.url}/models")
    expect(tab.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
    tab.close()

    forged = context.new_page()  # a tampered cookie is a stranger
    forged.context.add_cookies([{**cookie, "value": cookie["value"][:-2] + "AA"}])
    forged.goto(f"{dashboard.url}/jobs")
    _settled(forged)
    expect(forged.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible()
    forged.context.add_cookies([cookie])
    forged.close()

    page.reload()
    expect(page.get_by_text("Signed in as editor (editor)")).to_be_visible(timeout=60_000)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(timeout=60_000)
    page.reload()
    expect(page.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(timeout=60_000)
    context.close()

    copied = browser.new_context()  # the cookie copied before sign-out no longer works
    copied.add_cookies([cookie])
    stolen = copied.new_page()
    stolen.goto(f"{dashboard.url}/jobs")
    _settled(stolen)
    expect(stolen.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible()
    copied.close()


# How long the browser's trip to the session-cookie route takes in the slow-network test: the
# walkthrough saw the page say "Signed in as" about this long before the cookie existed.
COOKIE_ROUTE_DELAY_S = 3.0


def test_a_sign_in_is_complete_when_the_page_says_so(
    dashboard: Dashboard,
    browser,  # noqa: ANN001
) -> None:
    """Once the page says "Signed in as", another page opened in this browser (a new tab from a
    link, a reload) is signed in too: the session cookie exists by then, however slow the
    network. Each request to the route that sets the cookie is held COOKIE_ROUTE_DELAY_S seconds
    (a slow network; the server and the browser are the real ones); the test waits for nothing
    but the page's own "Signed in as"."""
    from playwright.sync_api import expect

    from backend.auth import sessions

    def slow_network(route) -> None:  # noqa: ANN001 - a playwright Route
        route.request.frame.page.wait_for_timeout(COOKIE_ROUTE_DELAY_S * 1000)  # not a sleep:
        route.continue_()  # the browser and the test go on meanwhile

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.route(f"**{sessions.START_PATH}*", slow_network)
    try:
        page = context.new_page()
        page.goto(f"{dashboard.url}/jobs?job={dashboard.job_id}")
        _sign_in(page, "editor")
        signed_in = page.get_by_text("Signed in as editor (editor)")
        expect(signed_in).to_be_visible(timeout=60_000)

        tab = context.new_page()  # at once: a link opened in a new tab
        tab.goto(f"{dashboard.url}/models")
        gate = tab.get_by_role("heading", name="Sign in to Optiboard")
        there = tab.get_by_text("Signed in as editor (editor)")
        expect(there.or_(gate)).to_be_visible(timeout=60_000)
        assert there.count() == 1, "a page opened right after sign-in asked to sign in again"
        expect(tab.get_by_role("heading", name="Models")).to_be_visible(timeout=60_000)

        page.reload()  # the signed-in page itself, reloaded: the same view, still signed in
        gate = page.get_by_role("heading", name="Sign in to Optiboard")
        expect(signed_in.or_(gate)).to_be_visible(timeout=60_000)
        assert signed_in.count() == 1, "a reload right after sign-in asked to sign in again"
        assert f"job={dashboard.job_id}" in page.url, page.url
    finally:
        context.unroute_all(behavior="ignoreErrors")  # a request still held when a check failed
        context.close()


def test_a_wrong_password_stays_at_the_gate(dashboard: Dashboard, browser) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    page = _page(browser)
    page.goto(f"{dashboard.url}/jobs")
    _sign_in(page, "editor", "not the password")
    expect(page.get_by_text("Wrong account name or password")).to_be_visible(timeout=30_000)
    expect(page.get_by_role("heading", name="Jobs")).to_have_count(0)
    # /home is Home (served at /): it got Streamlit's modal "Page not found", under which the
    # sign-in form took no input (fill timed out) until the dialog was closed
    page.goto(f"{dashboard.url}/home")
    _sign_in(page, "editor")
    expect(page.get_by_text("Signed in as editor")).to_be_visible(timeout=60_000)
    expect(page.get_by_role("heading", name="Optiboard")).to_be_visible()
    expect(page.get_by_text("Page not found")).to_have_count(0)
    page.context.close()


def test_a_shared_link_reopens_the_same_view_after_sign_in(
    dashboard: Dashboard,
    browser,  # noqa: ANN001
) -> None:
    from playwright.sync_api import expect

    page = _page(browser)
    link = f"{dashboard.url}/compare?jobs={dashboard.job_id}&charts=latency"
    page.goto(link)
    expect(page.get_by_text("Sign in to open the view this link points to.")).to_be_visible(
        timeout=60_000
    )
    _sign_in(page, "viewer")
    expect(page.get_by_role("heading", name="Compare")).to_be_visible(timeout=60_000)
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
    assert re.search(rf"/compare\?.*jobs={dashboard.job_id}", page.url), page.url
    assert "charts=latency" in page.url
    assert page.locator(".js-plotly-plot").count() == 1  # only the latency chart, as linked
    assert {"#1 mlp CPU FP32", "#1 mlp CPU INT8 static (QDQ)"} <= _legend(page)
    page.screenshot(path=str(ARTIFACTS / "e2e-signin-shared-view.png"), full_page=True)
    page.context.close()


def test_a_signed_link_works_without_an_account_and_expires(
    dashboard: Dashboard,
    browser,  # noqa: ANN001
) -> None:
    from playwright.sync_api import expect

    with seeding(dashboard.data_dir):
        from backend.auth import links

        valid = links.sign((dashboard.job_id,), datetime.now(UTC) + timedelta(hours=1))
        expired = links.sign((dashboard.job_id,), datetime.now(UTC) - timedelta(seconds=1))
    page = _page(browser)
    page.goto(f"{dashboard.url}/compare?jobs={dashboard.job_id}&share={valid}")
    expect(page.get_by_role("heading", name="Compare")).to_be_visible(timeout=60_000)
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
    expect(page.get_by_role("heading", name="Sign in to Optiboard")).to_have_count(0)
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    expect(page.get_by_role("link", name="Models")).to_have_count(0)  # no other page offered
    page.screenshot(path=str(ARTIFACTS / "e2e-signin-signed-link.png"), full_page=True)
    page.goto(f"{dashboard.url}/compare?jobs={dashboard.job_id}&share={expired}")
    expect(page.get_by_text("This link has expired")).to_be_visible(timeout=60_000)
    expect(page.locator(".js-plotly-plot")).to_have_count(0)
    page.context.close()


def test_oidc_sign_in_round_trip_through_a_real_provider(
    dashboard: Dashboard,
    browser,  # noqa: ANN001
) -> None:
    from playwright.sync_api import expect

    page = _page(browser)
    page.goto(f"{dashboard.url}/")
    expect(page.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(timeout=60_000)
    page.get_by_role("button", name="Sign in with your organisation").click()
    page.wait_for_url(re.compile(r".*/oauth2/authorize.*"), timeout=60_000)  # the provider's form
    page.locator("input[name=sub]").fill("lead@example.com")
    page.get_by_role("button", name="Authorize").click()
    expect(page.get_by_text("Signed in as lead@example.com (editor)")).to_be_visible(timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "e2e-signin-oidc.png"), full_page=True)
    _sign_out_to_the_provider(page, dashboard)
    page.goto(f"{dashboard.url}/")
    expect(page.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(timeout=60_000)
    page.context.close()


def _sign_out_to_the_provider(page, dashboard: Dashboard) -> None:  # noqa: ANN001
    """Sign out and land on the provider's end-session form. A click the page never acted on
    (still signed in, still here) is clicked once more; any other outcome fails with the URL, the
    page's text and the server's log, so a failure under load says what happened."""
    end_session = re.compile(r".*/oauth2/end_session.*")
    for attempt in (1, 2):
        page.get_by_role("button", name="Sign out").click()
        try:
            page.wait_for_url(end_session, timeout=30_000)
            return
        except Exception:  # noqa: BLE001 - playwright's TimeoutError; diagnosed below
            still_here = page.url.startswith(dashboard.url) and "Signed in as" in _text(page)
            if attempt == 1 and still_here:
                continue
        log = dashboard.log.read_text(errors="replace").splitlines()[-25:]
        raise AssertionError(
            f"sign-out did not reach the provider's end_session (attempt {attempt}): the page is "
            f"at {page.url} showing {_text(page)[:400]!r}; Streamlit's log ends: " + "\n".join(log)
        )


def _text(page) -> str:  # noqa: ANN001
    try:
        return page.inner_text("body", timeout=5_000)
    except Exception:  # noqa: BLE001 - a page mid-navigation has no body yet
        return ""


def _oidc_sign_in(page, subject: str) -> None:  # noqa: ANN001
    page.get_by_role("button", name="Sign in with your organisation").click()
    page.wait_for_url(re.compile(r".*/oauth2/authorize.*"), timeout=60_000)  # the provider's form
    page.locator("input[name=sub]").fill(subject)
    page.get_by_role("button", name="Authorize").click()


def test_oidc_sign_in_with_an_unverified_email_gets_no_account(
    dashboard: Dashboard,
    browser,  # noqa: ANN001
) -> None:
    """The provider names lead@example.com's address without email_verified for this subject:
    no account, no default role, one sentence and a way out."""
    from playwright.sync_api import expect

    page = _page(browser)
    page.goto(f"{dashboard.url}/")
    expect(page.get_by_role("heading", name="Sign in to Optiboard")).to_be_visible(timeout=60_000)
    _oidc_sign_in(page, "someone@example.com")  # the mock's claims: e-mail only, not verified
    expect(
        page.get_by_text("Your identity provider did not confirm that someone@example.com")
    ).to_be_visible(timeout=60_000)
    expect(page.get_by_text("Signed in as")).to_have_count(0)
    expect(page.get_by_role("link", name="Models")).to_have_count(0)
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    page.context.close()


def test_oidc_sign_in_reopens_the_view_a_shared_link_pointed_to(
    dashboard: Dashboard,
    browser,  # noqa: ANN001
) -> None:
    """The provider's round trip ends on the app's root; the link's page and view come back."""
    from playwright.sync_api import expect

    page = _page(browser)
    page.goto(f"{dashboard.url}/compare?jobs={dashboard.job_id}&charts=latency")
    expect(page.get_by_text("Sign in to open the view this link points to.")).to_be_visible(
        timeout=60_000
    )
    _oidc_sign_in(page, "lead@example.com")
    expect(page.get_by_text("Signed in as lead@example.com (editor)")).to_be_visible(timeout=60_000)
    expect(page.get_by_role("heading", name="Compare")).to_be_visible(timeout=60_000)
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
    assert re.search(rf"/compare\?.*jobs={dashboard.job_id}", page.url), page.url
    assert "charts=latency" in page.url
    assert page.locator(".js-plotly-plot").count() == 1  # only the latency chart, as linked
    page.screenshot(path=str(ARTIFACTS / "e2e-signin-oidc-shared-view.png"), full_page=True)
    page.goto(f"{dashboard.url}/")  # taken once: Home stays Home afterwards
    expect(page.get_by_text("Upload a model, sweep precisions")).to_be_visible(timeout=60_000)
    _settled(page)
    assert "compare" not in page.url
    page.context.close()


def test_a_page_reached_through_another_host_name_gets_no_session(
    dashboard: Dashboard,
    browser,  # noqa: ANN001
) -> None:
    """DNS rebinding: a web page whose name resolves to 127.0.0.1 cannot open the app."""
    port = dashboard.url.rsplit(":", 1)[1]
    page = _page(browser)
    page.goto(f"http://rebind.test:{port}/")
    rejected = f"disallowed Origin or Host header: origin=http://rebind.test:{port}"
    deadline = time.monotonic() + 60
    while rejected not in dashboard.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert rejected in dashboard.log.read_text()
    assert "Sign in to Optiboard" not in page.inner_text("body")
    page.context.close()
