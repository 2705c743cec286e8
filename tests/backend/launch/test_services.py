"""Services (long-running children): a stop leaves nothing of their process group running."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from backend.launch import pids
from backend.launch.services import group_stats, start_service, stop_service
from tests.processes import alive


def _running(group: int) -> list[list[str]]:
    return [fields for fields in group_stats(group) if fields[0] != "Z"]


def test_a_stop_ends_what_a_leader_that_already_exited_left_in_its_group(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    # the leader starts a grandchild (as tritonserver starts its backend stubs), then exits
    leader = start_service(["sh", "-c", f"sleep 300 & touch {ready}; exit 3"])
    deadline = time.monotonic() + 10
    while not (ready.exists() and leader.poll() is not None) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert leader.returncode == 3 and len(_running(leader.pid)) == 1  # the orphaned sleep
    stop_service(leader)
    assert _running(leader.pid) == []


def test_a_stop_with_grace_ends_a_running_leader_and_its_children() -> None:
    leader = start_service(["sh", "-c", "sleep 300 & sleep 300 & wait"])
    deadline = time.monotonic() + 10
    while len(_running(leader.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(_running(leader.pid)) == 3
    stop_service(leader, grace_s=2)
    assert leader.returncode is not None and _running(leader.pid) == []


def _until(condition: Callable[[], object], timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return bool(condition())


def test_a_graceful_stop_signals_the_leader_alone_so_it_ends_its_children_itself(
    tmp_path: Path,
) -> None:
    """As tritonserver unloads its models and ends its stubs on SIGTERM: a SIGTERM to the whole
    group would reach the stubs first (their shared memory then stayed in /dev/shm)."""
    got_term, stopped = tmp_path / "child-got-term", tmp_path / "leader-stopped"
    child = f"trap 'touch {got_term}; exit 0' TERM; while true; do sleep 0.05; done"
    leader = start_service(
        [
            "sh",
            "-c",
            # a moment before it ends the child: time for a stray SIGTERM to reach the child
            f'sh -c "{child}" & c=$!; '
            f"trap 'sleep 0.5; kill -USR1 $c; touch {stopped}; exit 0' TERM; wait",
        ]
    )
    assert _until(lambda: len(_running(leader.pid)) >= 2)
    stop_service(leader, grace_s=5)
    assert stopped.exists() and leader.returncode == 0  # the leader handled it and exited
    assert not got_term.exists()  # its child was ended by the leader, not by our signal
    assert _running(leader.pid) == []


def _escaping(pid_file: Path, seconds: int) -> list[str]:
    """A service whose child leaves the process group (a session of its own), as bwrap's inner
    process is left outside any group we kill when its parent dies during its set-up."""
    return ["sh", "-c", f"setsid sleep {seconds} & echo $! > {pid_file}; wait"]


def _cgroups_here() -> None:
    if not pids.available():
        assert os.getuid() != 0, "root here, and no pids cgroup could be made"
        pytest.skip("no pids cgroup can be made here (not root): such a leftover stays")


def test_a_stop_ends_what_left_the_process_group_too(tmp_path: Path) -> None:
    _cgroups_here()
    pid_file = tmp_path / "escaped"
    leader = start_service(_escaping(pid_file, 302))
    assert _until(lambda: pid_file.exists() and pid_file.read_text().strip())
    escaped = int(pid_file.read_text())
    assert alive(escaped) and escaped not in [int(f[1]) for f in _running(leader.pid)]
    stop_service(leader)
    assert _until(lambda: not alive(escaped))


def test_the_next_service_started_ends_what_a_killed_parents_service_left(tmp_path: Path) -> None:
    """A worker SIGKILLed while its service starts: the leftover is ended by the next launch."""
    import signal
    import subprocess
    import sys

    _cgroups_here()
    pid_file = tmp_path / "escaped"
    script = (
        "import time\n"
        "from backend.launch.services import start_service\n"
        f"start_service({_escaping(pid_file, 303)!r})\n"
        "time.sleep(300)\n"
    )
    root = Path(__file__).resolve().parents[3]
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=root)
    try:
        assert _until(lambda: pid_file.exists() and pid_file.read_text().strip())
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    escaped = int(pid_file.read_text())
    # its service died with the parent, the escaped child did not (without the cgroup it runs
    # on); it is not asserted alive here: a launch by any process beside this test may end it
    other = start_service(["true"])
    stop_service(other)
    assert _until(lambda: not alive(escaped))
