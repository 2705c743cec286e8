"""Long-running children (a Triton server, a Ray driver): the launcher's other door.

run_process (children.py) waits for a child to finish; a service runs beside its parent until it
is stopped. Both start the same way: a process group of their own, killed as a whole, and death
with the parent (PR_SET_PDEATHSIG), so a SIGKILLed worker leaves no server or driver behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from backend.launch.limits import die_with_parent


def start_service(
    argv: Sequence[str],
    *,
    log_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen:
    """Start `argv` with stdout and stderr in log_path (inherited when None).

    PR_SET_PDEATHSIG is tied to the thread that starts the child: stop it from that thread too.
    """
    log = open(log_path, "wb") if log_path is not None else None
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT if log is not None else None,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    finally:
        if log is not None:
            log.close()


def group_stats(group: int) -> list[list[str]]:
    """/proc/PID/stat fields after the command name (state first) of each process in a
    process group; a process that ends meanwhile is skipped."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:
            found.append(fields)
    return found


def stop_service(process: subprocess.Popen, grace_s: float = 0.0, settle_s: float = 5.0) -> None:
    """SIGTERM to the group and up to grace_s to exit (none: straight to SIGKILL), then SIGKILL
    to whatever of the group is left, even when its leader has already exited (a crashed server
    leaves its backend stubs), and up to settle_s until none of it runs any more."""
    if process.poll() is None and grace_s > 0:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=grace_s)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    deadline = time.monotonic() + settle_s  # SIGKILL lands asynchronously
    while any(f[0] != "Z" for f in group_stats(process.pid)) and time.monotonic() < deadline:
        time.sleep(0.02)
