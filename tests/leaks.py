"""The suite leaves nothing behind: no process still running and no Triton shared memory.

A server a test started and did not stop outlives pytest (a Triton Python-backend stub whose
server died is reparented to init and ran on for 50 minutes), and a shared memory region in
/dev/shm stays until the host reboots. At the start, the run's environment gets a tag that every
child inherits; at the end, what still runs with the tag or below pytest, and the regions that
Optiboard's servers (named by SHM_PREFIX) left since the start, fail the run by name and are
removed. Regions of other prefixes are not counted: other checkouts on a shared host start
servers of their own meanwhile.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from backend.serving.server import SHM_FOLDER, SHM_PREFIX
from tests.processes import stat_fields

TAG = "PYTEST_LEAK_TAG"
# Set by scripts/test for the parts that run beside the serial lane (the parallel part, the
# cluster lane): that lane's live Triton regions are not their leftovers (they start no Triton
# server; tests/tiers.py).
REGIONS_ELSEWHERE = "PYTEST_REGIONS_CHECKED_ELSEWHERE"
SETTLE_S = 10.0  # a server stopped by the last test may still be exiting
# Helpers of Python's own process pools: they exit with pytest, they do not outlive it.
IGNORED = ("loky", "multiprocessing.resource_tracker", "multiprocessing.forkserver")


_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# (clock ticks since boot, test id) at each test's start: a leftover names the test it began in
_TEST_STARTS: list[tuple[int, str]] = []


def test_started(nodeid: str) -> None:
    """Note a test's start, in the clock /proc/PID/stat gives a process's start in."""
    now = time.clock_gettime(time.CLOCK_BOOTTIME)
    _TEST_STARTS.append((int(now * _TICKS_PER_S), nodeid))


@dataclass(frozen=True)
class Baseline:
    """What ran and what was in /dev/shm before the first test."""

    pids: frozenset[int]
    regions: frozenset[str]


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:  # ended meanwhile, or another user's
        return b""


def _running() -> dict[int, tuple[int, bytes]]:
    """Every live process (zombies left out): pid -> (parent pid, environ)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = stat_fields(entry)
        if len(fields) < 2 or fields[0] == "Z":
            continue
        found[int(entry)] = (int(fields[1]), _read(f"/proc/{entry}/environ"))
    return found


def _ours(tag: str) -> set[int]:
    """Processes below pytest, and processes carrying the run's tag wherever they were
    reparented, pytest itself left out."""
    running = _running()
    marker = f"{TAG}={tag}".encode()
    mine = {pid for pid, (_, env) in running.items() if marker in env.split(b"\0")}
    below = {os.getpid()}
    grew = True
    while grew:
        more = {pid for pid, (parent, _) in running.items() if parent in below} - below
        below |= more
        grew = bool(more)
    return (mine | below) - {os.getpid()}


def _origin(pid: int) -> str:
    """Who started a leftover: its parent now (1 when the one that started it died) and the
    test that was running when it began, so a rare leak can be traced from one failed run."""
    fields = stat_fields(pid)
    if len(fields) < 20:
        return "ended meanwhile"
    parent, started = int(fields[1]), int(fields[19])
    during = [nodeid for ticks, nodeid in _TEST_STARTS if ticks <= started]
    test = f"started during {during[-1]}" if during else "started before the first test"
    return f"parent {parent} ({_command(parent)[:60] or 'gone'}), {test}"


def _command(pid: int) -> str:
    return _read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode(errors="replace").strip()


def _regions() -> set[str]:
    return {path.name for path in SHM_FOLDER.glob(f"{SHM_PREFIX}*")}


def regions_checked_here() -> bool:
    """Whether this run counts /dev/shm regions (no other run beside it starts servers)."""
    return not os.environ.get(REGIONS_ELSEWHERE)


def start() -> Baseline:
    """Tag this run's environment (once); note what already runs and what /dev/shm holds."""
    os.environ.setdefault(TAG, f"{os.getpid()}-{time.time_ns()}")
    return Baseline(frozenset(_ours(os.environ[TAG])), frozenset(_regions()))


def _left(
    baseline: Baseline, processes: bool = True, regions: bool = True
) -> tuple[dict[int, str], set[str]]:
    pids = _ours(os.environ[TAG]) - baseline.pids if processes else set()
    commands = {pid: _command(pid) for pid in pids}
    running = {
        pid: cmd for pid, cmd in commands.items() if cmd and not any(i in cmd for i in IGNORED)
    }
    return running, (_regions() - baseline.regions) if regions else set()


def leftovers(
    baseline: Baseline, settle_s: float = SETTLE_S, processes: bool = True, regions: bool = True
) -> list[str]:
    """What the run left, one line each (none: []), after settle_s for servers still exiting;
    each leftover is then killed or removed, so the host does not keep it. processes/regions
    False leaves that half to another check (pytest-xdist: workers check processes, the
    controller the regions)."""
    deadline = time.monotonic() + settle_s
    running, left = _left(baseline, processes, regions)
    while (running or left) and time.monotonic() < deadline:
        time.sleep(0.2)
        running, left = _left(baseline, processes, regions)
    lines = [
        f"process {pid} still runs ({_origin(pid)}): {cmd[:200]}"
        for pid, cmd in sorted(running.items())
    ]
    lines += [f"shared memory {SHM_FOLDER / name} is left" for name in sorted(left)]
    for pid in running:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for name in left:
        (SHM_FOLDER / name).unlink(missing_ok=True)
    return lines
