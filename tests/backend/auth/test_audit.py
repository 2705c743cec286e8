"""The audit log: opened before the action, closed ok / failed / denied, with who and when."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.auth import accounts
from backend.auth.audit import Action, Outcome, audited, recent
from backend.auth.cli import cli_principal
from backend.auth.roles import PermissionDenied, Principal, Role, Via
from backend.errors import UserError
from storage.repo import audit as audit_store

EDITOR = Principal("ed", Role.EDITOR, Via.PASSWORD)


def test_the_entry_exists_before_the_action_runs(data_dir: Path) -> None:
    with audited(EDITOR, Action.CANCEL, "job 7") as entry:
        during = recent()
        assert [(e.id, e.actor, e.action, e.outcome) for e in during] == [
            (entry, "ed", "cancel", Outcome.STARTED)
        ]
    after = recent()[0]
    assert after.outcome == Outcome.OK and after.target == "job 7"
    assert after.finished_at is not None and after.finished_at >= after.at


def test_a_failed_action_is_marked_failed_with_its_error(data_dir: Path) -> None:
    with pytest.raises(UserError), audited(EDITOR, Action.UPLOAD, "bad.onnx"):
        raise UserError("bad.onnx is not an ONNX model; upload a .onnx file.")
    entry = recent()[0]
    assert entry.outcome == Outcome.FAILED
    assert entry.error == "bad.onnx is not an ONNX model; upload a .onnx file."


def test_a_refused_action_is_recorded_as_denied_and_never_runs(data_dir: Path) -> None:
    ran = []
    with pytest.raises(PermissionDenied), audited(EDITOR, Action.DELETE, "model 1"):
        ran.append(True)
    assert ran == []
    entry = recent()[0]
    assert (entry.actor, entry.action, entry.outcome) == ("ed", "delete", Outcome.DENIED)


def test_user_changes_from_the_cli_are_recorded_as_cli_user(data_dir: Path) -> None:
    cli = cli_principal()
    accounts.add_account(cli, "ada", "viewer", "correct horse battery")
    accounts.set_role(cli, "ada", "editor")
    accounts.set_password(cli, "ada", "another long passphrase")
    accounts.remove_account(cli, "ada")
    rows = list(reversed(recent()))
    assert [r.action for r in rows] == ["user_add", "user_role", "user_password", "user_remove"]
    assert {r.actor for r in rows} == {f"cli:{cli.name}"}
    assert all(r.outcome == Outcome.OK and r.target == "ada" for r in rows)
    assert "another long passphrase" not in str([r.detail for r in rows])


def test_a_user_change_refused_by_a_rule_is_marked_failed_and_changes_nothing(
    data_dir: Path,
) -> None:
    accounts.add_account(cli_principal(), "root", "admin", "correct horse battery")
    with pytest.raises(UserError, match="last admin"):
        accounts.remove_account(cli_principal(), "root")
    assert recent()[0].outcome == Outcome.FAILED
    assert accounts.principal_for("root") is not None


def test_an_entry_left_started_shows_an_action_cut_short(data_dir: Path) -> None:
    entry = audit_store.open_entry("ed", Action.SUBMIT.value, "model 1", {})
    assert recent()[0].id == entry and recent()[0].outcome == Outcome.STARTED


def test_cli_commands_are_audited_only_in_their_forms_that_change_something(
    data_dir: Path, tmp_path: Path
) -> None:
    from backend import cli

    # a stored check's report and a folder measured in the terminal change nothing
    assert cli.main(["regress", "--report", "99"]) == 2
    assert cli.main(["generate", str(tmp_path / "no-such-folder")]) == 2
    assert recent() == []
    # a generation job queued (here refused: no such model) is a submit, audited as it ended
    assert cli.main(["generate", "99", "--submit"]) == 2
    entry = recent()[0]
    assert (entry.action, entry.target, entry.outcome) == ("submit", "model 99", Outcome.FAILED)
    assert entry.actor == f"cli:{cli_principal().name}"
