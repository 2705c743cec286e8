"""Access control through app.py in AppTest: the sign-in gate, role limits, signed links, audit."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from backend.auth import links
from backend.auth.audit import Outcome, recent
from backend.models import library
from backend.queue import jobs
from backend.specs import SweepSpec
from pages.components.formatting import plain
from tests.pages.seed import (
    ACCOUNT_PASSWORD,
    add_job,
    add_model,
    finished_sweep,
    make_account,
    open_page,
    submit_sign_in,
    texts,
)


def test_nobody_sees_a_page_before_signing_in(data_dir: Path, mlp_path: Path) -> None:
    add_model(mlp_path, "secret-model")
    for page in ("home", "models", "graph", "compatibility", "optimize", "jobs", "compare"):
        at = open_page(page, role=None)
        assert not at.exception, at.exception
        assert [t.value for t in at.title] == ["Sign in to Optiboard"], page
        assert "secret-model" not in texts(at)
        assert not at.sidebar.button  # no sign-out, no navigation, no worker status


def test_a_shared_link_asks_for_sign_in_then_opens_the_same_view(
    data_dir: Path, mlp_path: Path
) -> None:
    job, _ = finished_sweep(add_model(mlp_path, "mlp").id)
    make_account("viewer")
    at = open_page("compare", role=None, jobs=job.id, charts="latency")
    assert "Sign in to open the view this link points to." in texts(at)
    at = submit_sign_in(at, "viewer", ACCOUNT_PASSWORD)
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Compare"]
    assert at.query_params["jobs"] == [str(job.id)] or at.query_params["jobs"] == str(job.id)
    assert at.multiselect(key="url_jobs").value == [job.id]
    assert len(at.get("plotly_chart")) == 1  # charts=latency kept through sign-in


def test_a_wrong_password_keeps_the_gate_closed(data_dir: Path) -> None:
    make_account("editor")
    at = submit_sign_in(open_page("models", role=None), "editor", "not the password")
    assert "Wrong account name or password" in at.error[0].value
    assert [t.value for t in at.title] == ["Sign in to Optiboard"]


def test_a_viewer_cannot_see_upload_delete_submit_or_cancel(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    job = add_job(model.id, SweepSpec())
    at = open_page("models", role="viewer", model=model.id)
    assert not at.exception, at.exception
    assert not [u for u in at.get("file_uploader")]
    assert "delete_model" not in [b.key for b in at.button]
    said = [c.value for c in at.caption]  # each missing control says why, as Optimize does
    assert "Your role (viewer) cannot upload a model; editors and admins can." in said, said
    assert "Your role (viewer) cannot delete a model; admins can." in said, said
    at = open_page("optimize", role="viewer", model=model.id)
    assert at.button(key="submit_sweep").disabled
    at = open_page("jobs", role="viewer", job=job.id)
    assert f"cancel_{job.id}" not in [b.key for b in at.button]
    assert "Users" not in [p.proto.label for p in at.get("page_link")]


def test_an_editor_uploads_and_cancels_but_cannot_delete(data_dir: Path, mlp_path: Path) -> None:
    at = open_page("models", role="editor")
    at.file_uploader(key="upload_file").set_value(("mlp.onnx", mlp_path.read_bytes(), "x"))
    next(b for b in at.button if b.label == "Add to library").click()
    at = at.run()
    assert not at.exception, at.exception
    (model,) = library.list_models()
    assert "delete_model" not in [b.key for b in at.button]
    job = add_job(model.id, SweepSpec())
    at = open_page("jobs", role="editor", job=job.id)
    at.button(key=f"cancel_{job.id}").click().run()
    assert jobs.get_job(job.id).state.finished
    log = [(e.actor, e.action, e.outcome) for e in reversed(recent())]
    assert ("editor", "upload", Outcome.OK) in log and ("editor", "cancel", Outcome.OK) in log


def test_an_admin_deletes_and_the_delete_is_audited(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    at = open_page("models", model=model.id)
    at.checkbox(key=f"confirm_delete_{model.id}").check().run()
    at.button(key="delete_model").click().run()
    assert library.list_models() == []
    entry = recent()[0]
    assert (entry.actor, entry.action, entry.outcome) == ("admin", "delete", Outcome.OK)
    assert entry.target.startswith(f"model {model.id}")


def test_only_admins_reach_the_users_page_and_changes_are_audited(data_dir: Path) -> None:
    at = open_page("users", role="editor")  # not in an editor's navigation: Home opens instead
    assert "Users" not in [t.value for t in at.title]
    at = open_page("users")
    at.text_input(key="new_name").input("newcomer")
    at.text_input(key="new_password").input("a long enough passphrase")
    next(b for b in at.button if b.label == "Add account").click()
    at = at.run()
    assert not at.exception, at.exception
    assert "Added newcomer (viewer)." in texts(at)
    assert recent()[0].action == "user_add" and recent()[0].actor == "admin"


def _walk(node: Any) -> Iterator[Any]:
    """A page's elements and blocks in the order they are drawn."""
    yield node
    for index in sorted(getattr(node, "children", {})):
        yield from _walk(node.children[index])


def _named(node: Any) -> str:
    """The made link and the popover that makes it, by name; anything else by its type."""
    if node.type == "code" and "share=" in node.value:
        return "the link"
    if node.type == "popover" and "Read-only link" in node.proto.popover.label:
        return "its popover"
    return node.type


def test_an_editor_makes_a_signed_link_and_it_is_audited(data_dir: Path, mlp_path: Path) -> None:
    job, _ = finished_sweep(add_model(mlp_path, "mlp").id)
    at = open_page("compare", role="editor", jobs=job.id)
    days = at.number_input(key="link_days")
    assert (days.value, days.proto.format, days.step) == (7.0, "%g", 1.0)  # "7", not "7.00"
    at.button(key="make_link").click().run()
    assert not at.exception, at.exception
    url = next(c.value for c in at.code if "share=" in c.value)
    # above the popover's button: under it, the popover (it stays open) covered the link
    drawn = [_named(n) for n in _walk(at.main)]
    assert drawn.index("the link") < drawn.index("its popover"), drawn
    token = url.split("share=")[1].split("&")[0]
    assert links.verify(token).jobs == (job.id,)
    assert (recent()[0].action, recent()[0].actor) == ("link_create", "editor")
    assert "make_link" not in [b.key for b in open_page("compare", role="viewer").button]


def test_a_signed_link_shows_only_its_comparison_read_only(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    shared, _ = finished_sweep(model.id, label="shared one")
    other, _ = finished_sweep(model.id, label="private one")
    token = links.sign((shared.id,), datetime.now(UTC) + timedelta(hours=1))
    at = open_page("compare", role=None, jobs=f"{shared.id},{other.id}", share=token)
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Compare"]
    assert at.multiselect(key="url_jobs").options == [f"#{shared.id} mlp · shared one"]
    assert "private one" not in texts(at)
    assert "make_link" not in [b.key for b in at.button]
    assert not at.sidebar.button
    at.switch_page("pages/models.py").run()  # another page's address runs Compare instead
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Compare"]
    assert at.multiselect(key="url_jobs").options == [f"#{shared.id} mlp · shared one"]


def test_an_expired_or_forged_link_opens_nothing(data_dir: Path, mlp_path: Path) -> None:
    job, _ = finished_sweep(add_model(mlp_path, "mlp").id)
    expired = links.sign((job.id,), datetime.now(UTC) - timedelta(seconds=1))
    at = open_page("compare", role=None, jobs=job.id, share=expired)
    assert "This link has expired" in at.error[0].value
    assert not at.title and not at.multiselect
    at = open_page("compare", role=None, jobs=job.id, share=expired[:-3] + "AAA")
    assert "This link is not valid" in at.error[0].value


def test_the_sidebar_shows_no_server_paths(data_dir: Path) -> None:
    at = open_page("home")
    shown = "\n".join(str(e.value) for e in at.sidebar.caption) + texts(at)
    assert str(data_dir) not in shown and "sqlite" not in shown


def test_a_failed_jobs_traceback_with_server_paths_is_for_admins_only(
    data_dir: Path, mlp_path: Path
) -> None:
    from storage.repo import jobs as job_store
    from storage.states import JobState

    job = add_job(add_model(mlp_path).id, SweepSpec())
    assert job_store.claim_job("w", 60, job_id=job.id) is not None
    traceback = (
        'Traceback (most recent call last):\n  File "/srv/optiboard/backend/engine/run.py", '
        "line 1, in run\nRuntimeError: the session could not be created"
    )
    job_store.finish_job(job.id, JobState.FAILED, error=traceback, worker_id="w")
    at = open_page("jobs", role="editor", job=job.id)
    # the last line, as text (plain() escapes Markdown in a worker's error)
    assert at.error[0].value == plain("RuntimeError: the session could not be created")
    assert "/srv/optiboard" not in "\n".join(c.value for c in at.code)
    at = open_page("jobs", role="admin", job=job.id)
    assert any("/srv/optiboard" in c.value for c in at.code)


PAGES_DIR = Path(__file__).parents[2] / "pages"
PAGE_PERMISSIONS = {
    "home": "browse",
    "models": "browse",
    "graph": "browse",
    "compatibility": "browse",
    "optimize": "browse",
    "jobs": "browse",
    "serve": "browse",
    "compare": "compare",
    "users": "users",
}


def _run_alone(page: str, **query: object) -> AppTest:
    """Run one page module as its own main script, without app.py's gate: what Streamlit's
    legacy pages/ mode does for the first visitors after a server start."""
    at = AppTest.from_file(str(PAGES_DIR / f"{page}.py"), default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = str(value)
    return at.run()


def test_every_page_run_without_app_py_shows_only_the_sign_in_form(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path, "secret-model")
    job, _ = finished_sweep(model.id, label="secret-job")
    for page in PAGE_PERMISSIONS:
        at = _run_alone(page, model=model.id, job=job.id, jobs=job.id)
        assert not at.exception, (page, at.exception)
        assert [t.value for t in at.title] == ["Sign in to Optiboard"], page
        shown = texts(at)
        assert "secret-model" not in shown and "secret-job" not in shown, page
        assert not at.get("download_button") and not at.get("iframe"), page
        assert not at.selectbox and not at.multiselect and not at.dataframe, page


def test_a_page_run_without_app_py_refuses_who_may_not_open_it(
    data_dir: Path, mlp_path: Path
) -> None:
    from tests.pages.seed import sign_in_as

    model = add_model(mlp_path, "secret-model")
    job, _ = finished_sweep(model.id)
    token = links.sign((job.id,), datetime.now(UTC) + timedelta(hours=1))
    at = _run_alone("graph", model=model.id, share=token)  # a link opens only its comparison
    assert "opens only its comparison" in at.error[0].value
    assert not at.title and "secret-model" not in texts(at)
    at = AppTest.from_file(str(PAGES_DIR / "users.py"), default_timeout=120)
    at = sign_in_as(at, "editor").run()
    assert "may not open this page" in at.error[0].value
    assert not at.dataframe and not at.title


def test_a_viewer_reads_why_submit_is_greyed_out(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", role="viewer", model=model.id)
    assert at.button(key="submit_sweep").disabled
    assert "Your role (viewer) cannot submit a sweep; editors and admins can." in texts(at)
    at = open_page("optimize", role="editor", model=model.id)
    assert not at.button(key="submit_sweep").disabled
    assert "cannot submit" not in texts(at)


def test_the_users_address_tells_a_non_admin_it_is_for_admins(data_dir: Path) -> None:
    for role in ("viewer", "editor"):
        at = open_page("users", role=role)
        assert not at.exception, at.exception
        assert [e.value for e in at.error] == [
            f"This page is for admins: your role ({role}) may not open this page; ask an admin."
        ]
        assert not at.dataframe and "Users" not in [t.value for t in at.title]
        assert "Users" not in [p.proto.label for p in at.get("page_link")]  # still not in a menu


def test_a_refused_change_keeps_every_control_and_removal_asks_to_confirm(data_dir: Path) -> None:
    make_account("viewer")
    at = open_page("users")
    at.selectbox(key="edit_name").select("viewer").run()
    assert at.selectbox(key="edit_role").value == "viewer"  # the picked account's role
    at.selectbox(key="edit_name").select("admin").run()
    assert at.selectbox(key="edit_role").value == "admin"  # not left at the last one's
    at.selectbox(key="edit_role").select("viewer")
    at.button(key="set_role").click().run()
    assert not at.exception, at.exception
    assert "last admin" in at.error[0].value
    keys = [b.key for b in at.button]
    assert "set_password" in keys and "remove_user" in keys  # drawn despite the refusal
    # removing the last admin is refused too, and the confirmation does not stay ticked
    at.checkbox(key="confirm_remove_admin").check().run()
    at.button(key="remove_user").click().run()
    assert "last admin" in at.error[0].value
    assert not at.checkbox(key="confirm_remove_admin").value
    assert at.run().button(key="remove_user").disabled  # until it is ticked again

    at.selectbox(key="edit_name").select("viewer").run()
    assert at.button(key="remove_user").disabled
    assert "Tick the box to remove viewer: its sign-ins end, for good." in texts(at)
    at.checkbox(key="confirm_remove_viewer").check().run()
    at.button(key="remove_user").click().run()
    assert not at.exception, at.exception
    assert "Removed viewer." in texts(at)
    assert [e.action for e in recent()][0] == "user_remove"
