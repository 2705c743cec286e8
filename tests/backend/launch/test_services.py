"""Services (long-running children): a stop leaves nothing of their process group running."""

from __future__ import annotations

import time
from pathlib import Path

from backend.launch.services import group_stats, start_service, stop_service


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
