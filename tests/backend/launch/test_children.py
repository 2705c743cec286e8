import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from backend.errors import UserError
from backend.launch.children import run_call, run_in_child, run_module
from backend.launch.folders import UNLOCKED_GRACE_S
from tests.processes import ended_pid


def _square(x: int) -> int:
    return x * x


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def _sleep_forever() -> None:
    time.sleep(600)


def _user_error() -> None:
    raise UserError("The model needs a value for 'seq'.")


def _bug() -> None:
    raise KeyError("boom")


def test_child_returns_its_value() -> None:
    outcome = run_in_child(_square, 7, timeout_s=60)
    assert outcome.ok and outcome.value == 49


def test_segfault_in_the_child_is_reported_not_inherited() -> None:
    outcome = run_in_child(_crash, timeout_s=60)
    assert not outcome.ok and "SIGSEGV" in outcome.error and "crashed" in outcome.error


def test_time_limit_kills_the_child() -> None:
    started = time.monotonic()
    outcome = run_in_child(_sleep_forever, timeout_s=1, tick_s=0.1)
    assert outcome.timed_out and "time limit of 1 s" in outcome.error
    assert time.monotonic() - started < 30


def test_cancel_kills_the_child() -> None:
    outcome = run_in_child(_sleep_forever, timeout_s=60, should_cancel=lambda: True, tick_s=0.1)
    assert outcome.cancelled


def test_user_errors_keep_their_sentence_and_bugs_their_traceback() -> None:
    user = run_in_child(_user_error, timeout_s=60)
    assert user.error == "The model needs a value for 'seq'." and user.value == "user_error"
    bug = run_in_child(_bug, timeout_s=60)
    assert "Traceback" in bug.error and "KeyError: 'boom'" in bug.error


def _scratch_folders() -> list[Path]:
    root = Path(tempfile.gettempdir()) / "optiboard-children"
    return sorted(root.glob(f"optiboard-child-{os.getpid()}-*"))


def test_the_parent_removes_the_folder_of_a_child_it_killed() -> None:
    seen: list[list[Path]] = []

    outcome = run_in_child(
        _sleep_forever, timeout_s=1, tick_s=0.1, on_tick=lambda: seen.append(_scratch_folders())
    )

    assert outcome.timed_out
    assert any(seen), "the child had a folder while it ran"
    assert _scratch_folders() == []


def test_folders_left_by_a_dead_parent_are_swept(tmp_path: Path) -> None:
    root = Path(tempfile.gettempdir()) / "optiboard-children"
    root.mkdir(parents=True, exist_ok=True)
    orphan = root / f"optiboard-child-{ended_pid()}-abc"  # an older version's: no lock file
    orphan.mkdir()
    made = time.time() - 2 * UNLOCKED_GRACE_S  # one being made has a minute to lock its folder
    os.utime(orphan, (made, made))

    assert run_in_child(_square, 3, timeout_s=60).value == 9

    assert not orphan.exists()


def test_run_call_passes_json_and_moves_named_outputs(tmp_path: Path) -> None:
    destination = tmp_path / "kept.txt"

    value = run_call(
        "tests.backend.launch.probes:try_writes",
        ["kept.txt"],
        timeout_s=60,
        what="The probe",
        outputs={"kept.txt": destination},
    )

    assert value == {"kept.txt": "written"}
    assert destination.read_text() == "escaped"


def test_run_call_turns_a_user_error_into_the_same_sentence(tmp_path: Path, mlp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^tests.txt is not a readable .npz file"):
        run_call(
            "backend.engine.calibration:child_check_calibration",
            str(tmp_path / "tests.txt"),
            str(mlp_path),
            {},
            timeout_s=60,
            what="The check",
        )


def test_run_module_returns_stdout_and_reports_a_crash() -> None:
    assert run_module("platform", "--terse", timeout_s=60, what="platform").startswith("Linux")
    with pytest.raises(RuntimeError, match=r"the probe crashed \(exit 2\)"):
        run_module("json.tool", "/no/such/file", timeout_s=60, what="the probe")


def test_a_child_sees_scikit_learn_as_absent_though_it_is_installed() -> None:
    """keras and transformers import it (and SciPy) only for optional wrappers; no child uses
    it (backend/launch/childmain.UNUSED_IN_CHILDREN)."""
    import importlib.util

    from tests.backend.launch import probes

    assert importlib.util.find_spec("sklearn") is not None  # installed: the answer means something
    there = run_in_child(probes.optional_imports, timeout_s=60)
    assert there.ok and there.value == {"found": False, "imported": False}
