"""A signed-in tab is checked again on every run: a new password, a new role, a removal or a
sign-out elsewhere ends it at its next run (issue 21, item 10). Real app.py in AppTest, real
argon2 accounts on a real SQLite file; the admin's changes go through the Users page."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.pages.seed import ACCOUNT_PASSWORD, make_account, open_page, submit_sign_in

NEW_PASSWORD = "another long passphrase"
GATE = ["Sign in to Optiboard"]


def _titles(at: AppTest) -> list[str]:
    return [t.value for t in at.title]


def _who(at: AppTest) -> list[str]:
    return [t.value for t in at.sidebar.text]


def _admin_changes(name: str, button: str, **inputs: str) -> None:
    """What an admin does on the Users page, in the admin's own session."""
    admin = open_page("users")
    admin.selectbox(key="edit_name").select(name).run()  # a pick reruns, as in a browser
    for key, value in inputs.items():
        widget = admin.selectbox(key=key) if key == "edit_role" else admin.text_input(key=key)
        widget.select(value) if key == "edit_role" else widget.input(value)
    if button == "remove_user":  # asks for a confirmation naming the account first
        admin.run().checkbox(key=f"confirm_remove_{name}").check().run()
    admin.button(key=button).click()
    admin = admin.run()
    assert not admin.exception and not admin.error, (admin.exception, admin.error)


def _signed_in_tab(name: str, password: str = ACCOUNT_PASSWORD) -> AppTest:
    at = submit_sign_in(open_page("jobs", role=None), name, password)
    assert not at.exception, at.exception
    assert _titles(at) == ["Jobs"]
    return at


def test_a_new_password_role_or_removal_ends_a_signed_in_tab_at_its_next_run(
    data_dir: Path,
) -> None:
    make_account("editor")
    tab = _signed_in_tab("editor")
    assert _who(tab) == ["Signed in as editor (editor)"]

    _admin_changes("editor", "set_password", edit_password=NEW_PASSWORD)
    tab = tab.run()
    assert _titles(tab) == GATE and not tab.sidebar.button
    tab = submit_sign_in(tab, "editor", NEW_PASSWORD)
    assert _titles(tab) == ["Jobs"]

    _admin_changes("editor", "set_role", edit_role="viewer")
    tab = tab.run()
    assert _titles(tab) == GATE
    tab = submit_sign_in(tab, "editor", NEW_PASSWORD)
    assert _who(tab) == ["Signed in as editor (viewer)"]  # the new role from the next sign-in

    _admin_changes("editor", "remove_user")
    tab = tab.run()
    assert _titles(tab) == GATE


def test_signing_out_in_another_tab_ends_this_one(data_dir: Path) -> None:
    from pages.access import SESSION_KEY

    make_account("editor")
    tab = _signed_in_tab("editor")
    other = AppTest.from_file(str(Path(__file__).parents[2] / "app.py"), default_timeout=120)
    other.session_state[SESSION_KEY] = tab.session_state[SESSION_KEY]  # as its cookie gives it
    other = other.run()
    assert _who(other) == ["Signed in as editor (editor)"]
    other.sidebar.button(key="sign_out").click()
    assert _titles(other.run()) == GATE
    assert _titles(tab.run()) == GATE
    assert _titles(_signed_in_tab("editor")) == ["Jobs"]  # a new sign-in is a new session


def test_a_tabs_session_opens_nothing_from_another_browser(data_dir: Path) -> None:
    """Streamlit's session id names the server-side state on reconnect; the sign-in in it is
    kept with the browser it was made in, so that id alone opens nothing elsewhere."""
    from pages.access import SESSION_KEY

    make_account("editor")
    tab = _signed_in_tab("editor")
    session, _browser = tab.session_state[SESSION_KEY]
    elsewhere = AppTest.from_file(str(Path(__file__).parents[2] / "app.py"), default_timeout=120)
    elsewhere.session_state[SESSION_KEY] = (session, "key of another browser")
    assert _titles(elsewhere.run()) == GATE
