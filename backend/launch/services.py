"""Long-running children (a Triton server, a Ray driver): the launcher's other door.

run_process (children.py) waits for a child to finish; a service runs beside its parent until it
is stopped. Both start the same way: a process group of their own, killed as a whole, and death
with the parent (PR_SET_PDEATHSIG, SIGKILL), so a SIGKILLed worker leaves no server or driver
behind. A sandboxed Triton's Python-backend stubs end with it: they live in bwrap's PID namespace,
which ends with the server, and in the service's cgroup (below).

Death with the parent has a gap: bwrap's inner process sets its own PR_SET_PDEATHSIG only after
its set-up, so a worker SIGKILLed while a sandboxed server starts leaves that process blocked
forever, reparented to init (bubblewrap issue 633; seen in about half of the CI runs whose
serving test kills a worker at that moment). So a service also runs in a pids cgroup of its own
where one can be made (pids.py, with no cap): stop_service removes it with whatever is left
in it, and the next launch on the host sweeps the groups whose parent died.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

from backend.launch import pids
from backend.launch.limits import die_with_parent

_GROUPS: dict[int, ExitStack] = {}  # a running service's pid -> its cgroup, closed by stop_service


def start_service(
    argv: Sequence[str],
    *,
    log_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen:
    """Start `argv` with stdout and stderr in log_path (inherited when None); it is SIGKILLed when
    its parent dies.

    PR_SET_PDEATHSIG is tied to the thread that starts the child: stop it from that thread too.
    """
    cgroup = ExitStack()
    tasks = cgroup.enter_context(pids.group(None))
    log = open(log_path, "wb") if log_path is not None else None
    try:
        process = subprocess.Popen(
            tasks.wrap(list(argv)) if tasks is not None else list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT if log is not None else None,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    except BaseException:
        cgroup.close()
        raise
    finally:
        if log is not None:
            log.close()
    _GROUPS[process.pid] = cgroup
    return process


def _group_scan(group: int) -> list[tuple[int, str, list[str]]]:
    """(pid, command name, /proc/PID/stat fields after the name, state first) of each process in
    a process group; a process that ends meanwhile is skipped."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                name, rest = stat.read().rsplit(")", 1)
        except (OSError, ValueError):
            continue
        fields = rest.split()
        if int(fields[2]) == group:
            found.append((int(entry), name.split("(", 1)[1], fields))
    return found


def group_stats(group: int) -> list[list[str]]:
    """/proc/PID/stat fields after the command name (state first) of each process in a group."""
    return [fields for _, _, fields in _group_scan(group)]


def group_members(group: int) -> dict[int, str]:
    """pid -> command name of each live (not zombie) process in a process group."""
    return {pid: name for pid, name, fields in _group_scan(group) if fields[0] != "Z"}


def stop_service(
    process: subprocess.Popen,
    grace_s: float = 0.0,
    settle_s: float = 5.0,
    stop_signal: signal.Signals = signal.SIGTERM,
    server_pid: int | None = None,
) -> None:
    """stop_signal to the leader alone and up to grace_s for it to exit (none: straight to
    SIGKILL), then SIGKILL to whatever of the group is left, even when its leader has already
    exited (a crashed server leaves its backend stubs), and up to settle_s until none of it runs.

    The leader alone: a server told to stop shuts its own children down in order (Triton unloads
    its models, each Python-backend stub exits and its shared memory is released); a signal to
    the whole group would kill the stubs under it first. server_pid: the server when it is not
    the leader (inside a sandbox the leader is bwrap, which exits when the server has).
    """
    if process.poll() is None and grace_s > 0:
        try:
            if server_pid is None:
                process.send_signal(stop_signal)
            else:
                os.kill(server_pid, stop_signal)
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
    cgroup = _GROUPS.pop(process.pid, None)
    if cgroup is not None:  # and what left the process group but not the cgroup
        cgroup.close()
