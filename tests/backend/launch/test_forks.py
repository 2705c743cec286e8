"""The fork server's door (backend/launch/forks.py): each call runs in a fresh fork of one warm
child that imported the preload once, and ends in the words a call child's would."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import settings
from backend.launch import pids, sandbox
from backend.launch.children import call_in_child
from backend.launch.forks import Forks
from backend.launch.limits import ChildLimits
from tests.processes import alive

PROBES = "tests.backend.launch.probes"
TESTS = sandbox.Binds.of(read_only=[settings.PROJECT_ROOT / "tests"])  # the probes' code


def _call(forks: Forks, name: str, *args: object, sandboxed: bool = False, **kwargs: object):
    binds = TESTS if sandboxed else None
    options = {"timeout_s": 60, "what": "The probe", "sandboxed": sandboxed, "binds": binds}
    return forks.call(f"{PROBES}:{name}", *args, **{**options, **kwargs})  # type: ignore[arg-type]


@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandboxed"])
def test_each_call_runs_in_a_fresh_fork_of_one_warm_server(sandboxed: bool) -> None:
    with Forks(["numpy"]) as forks:
        first, second = (_call(forks, "process_facts", sandboxed=sandboxed) for _ in range(2))
        remembered = [
            _call(forks, "remember", word, sandboxed=sandboxed).value for word in ("one", "two")
        ]
        server = forks.server
        assert server is not None
        scratch = server.folder.scratch

    assert first.ok and second.ok, (first.error, second.error)
    facts = first.value, second.value
    assert facts[0]["pid"] != facts[1]["pid"] and facts[0]["ppid"] == facts[1]["ppid"]
    assert forks.started == 1
    assert all(f["numpy_before"] for f in facts)  # imported once, by the server
    assert all(f["threads"] == 1 for f in facts)
    assert all(f["fds"] == [0, 1, 2, 3] for f in facts)  # 3: the listing's own; no server pipe
    if sandboxed:  # nor through /proc (a plain child is trusted code, root's if root runs it)
        assert all(set(f["parents_fds"].values()) == {"PermissionError"} for f in facts)
    assert all(f["clear_refs"] for f in facts)  # its own /proc: the peak-memory reset works
    folders = [Path(f["cwd"]) for f in facts]
    assert folders[0] != folders[1] and all(f.parent == scratch for f in folders)
    if sandboxed:  # as a call child's: HOME and TMPDIR are its own folder
        assert all(f["home"] == f["tmp"] == f["cwd"] for f in facts)
    assert remembered == [None, None]  # nothing one call leaves is seen by the next
    assert not scratch.exists() and not alive(server.process.pid)


def test_a_call_past_its_time_ends_the_server_and_the_next_gets_a_new_one() -> None:
    with Forks([]) as forks:
        late = _call(forks, "sleep_for", 60, timeout_s=1)
        ended = forks.started, late
        after = _call(forks, "process_facts")

    assert ended[1].timed_out and ended[1].error == "time limit of 1 s exceeded"
    assert ended[0] == 1 and after.ok and forks.started == 2


def test_a_cancel_ends_the_call_and_its_server() -> None:
    with Forks([]) as forks:
        outcome = _call(forks, "sleep_for", 60, should_cancel=lambda: True)
        server = forks.server

    assert outcome.cancelled and outcome.error == "cancelled" and server is None


def test_a_crash_fails_its_call_alone_and_the_server_serves_the_next() -> None:
    with Forks([]) as forks:
        crashed = _call(forks, "crash")
        after = _call(forks, "process_facts")

    assert not crashed.ok and crashed.exitcode == -signal.SIGSEGV
    assert crashed.error == "the child process died from SIGSEGV (the runtime crashed)"
    assert after.ok and forks.started == 1


def test_errors_come_back_in_a_call_childs_words(tmp_path: Path) -> None:
    sentence = "The file is not a model; upload an .onnx file."
    cold = call_in_child(f"{PROBES}:refuse", sentence, timeout_s=60, what="The probe")
    with Forks([]) as forks:
        warm = _call(forks, "refuse", sentence)
        bug = _call(forks, "remember")  # a missing argument: a bug's traceback

    assert (warm.ok, warm.value, warm.error) == (False, "user_error", sentence)
    assert (cold.ok, cold.value, cold.error) == (warm.ok, warm.value, warm.error)
    assert bug.value == "error" and "TypeError" in (bug.error or "")


def test_each_fork_runs_under_the_childs_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIBOARD_CHILD_MEMORY_MB", "1024")
    monkeypatch.setenv("OPTIBOARD_CHILD_CPU_S", "1")
    monkeypatch.setenv("OPTIBOARD_CHILD_PROCS", "40")
    with Forks([]) as forks:
        memory = _call(forks, "allocate", 4)
        cpu = _call(forks, "spin")
        bomb = _call(forks, "fork_bomb", 400) if os.getuid() != 0 or pids.available() else None
        again = _call(forks, "spin")  # a fork's CPU time starts at zero: its own second

    assert memory.limit == "memory" and "memory limit of 1024 MB" in (memory.error or "")
    assert cpu.limit == "cpu" and cpu.exitcode == -signal.SIGXCPU
    assert again.limit == "cpu"
    if bomb is not None:
        assert bomb.limit == "procs" and "more than 40 processes" in (bomb.error or "")
    assert forks.started == 1


def test_gpu_children_keep_a_process_of_their_own() -> None:
    with Forks(["numpy"]) as forks:
        outcome = _call(forks, "process_facts", limits=ChildLimits.from_settings(gpu=True))

    assert outcome.ok and not outcome.value["numpy_before"] and forks.started == 0


def test_what_a_sandboxed_fork_leaves_running_ends_before_the_next_call(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    binds = sandbox.Binds.of(read_only=[settings.PROJECT_ROOT / "tests"], writable=[tmp_path])
    with Forks([]) as forks:
        left = _call(forks, "leave_behind", str(marker), sandboxed=True, binds=binds)
        time.sleep(4)
        after = _call(forks, "process_facts", sandboxed=True, binds=binds)

    assert left.ok and after.ok and forks.started == 1
    assert not marker.exists()  # the process left behind was ended before it could write
