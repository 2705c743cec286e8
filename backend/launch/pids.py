"""A pids cgroup per child: the process-count limit that also holds when the service is root.

The kernel does not enforce RLIMIT_NPROC for root (uid 0 and CAP_SYS_RESOURCE are exempt), and a
user namespace that shows root as another uid does not help: the kernel checks the real, outside
uid. The pids controller of cgroups has no such exemption. So when a pids hierarchy is writable
(root on cgroup v1 `/sys/fs/cgroup/pids`, or cgroup v2 with the pids controller), every child
starts in a cgroup of its own with pids.max = OPTIBOARD_CHILD_PROCS (processes *and* threads of
that child only). The child enters it before exec (a `sh` shim writes its pid into cgroup.procs,
then execs the real command, so nothing of the child runs outside). Afterwards the parent reads
whether the cap was hit (pids.events), kills what is left and removes the cgroup. Where no
hierarchy is writable (an unprivileged service, a container without cgroup access), the child's
RLIMIT_NPROC (limits.py) is the process limit, which the kernel enforces for every user but root.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/pids")
V2_ROOT = Path("/sys/fs/cgroup")
GROUP = "optiboard"
PREFIX = "child-"
# replaces itself with the real command once its pid is in the cgroup; $1 is cgroup.procs
SHIM = 'echo $$ > "$1" || exit 125; shift; exec "$@"'
_counter = itertools.count()


@dataclass(frozen=True)
class PidsGroup:
    """One child's cgroup folder."""

    path: Path

    def wrap(self, argv: list[str]) -> list[str]:
        """argv run inside this cgroup from its first instruction on."""
        return ["/bin/sh", "-c", SHIM, "sh", str(self.path / "cgroup.procs"), *argv]

    def limit_hit(self) -> bool:
        """True once a fork or thread start in the child was refused by pids.max."""
        try:
            text = (self.path / "pids.events").read_text()
        except OSError:
            return False
        counts = dict(line.split() for line in text.splitlines() if line.strip())
        return int(counts.get("max", "0")) > 0


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK)


@functools.cache
def _parent() -> Path | None:
    """The folder that holds the children's cgroups, created once; None where none can be."""
    try:
        if (V1_ROOT / "tasks").exists() and _writable(V1_ROOT):
            parent = V1_ROOT / GROUP
            parent.mkdir(exist_ok=True)
            return parent
        controllers = V2_ROOT / "cgroup.controllers"
        if controllers.exists() and "pids" in controllers.read_text().split():
            if not _writable(V2_ROOT):
                return None
            (V2_ROOT / "cgroup.subtree_control").write_text("+pids")
            parent = V2_ROOT / GROUP
            parent.mkdir(exist_ok=True)
            (parent / "cgroup.subtree_control").write_text("+pids")
            return parent
    except OSError:
        return None
    return None


def available() -> bool:
    """Whether children get a pids cgroup here (else RLIMIT_NPROC is the only process limit)."""
    return _parent() is not None


def _kill_members(path: Path) -> None:
    try:
        pids = (path / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _remove(path: Path, attempts: int = 50) -> None:
    """Kill what is left in the cgroup and remove it (rmdir fails until the last task is reaped)."""
    for _ in range(attempts):
        _kill_members(path)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def _sweep(parent: Path) -> None:
    """Remove cgroups whose parent process is gone (it was SIGKILLed before its cleanup)."""
    for folder in parent.glob(f"{PREFIX}*"):
        owner = folder.name.removeprefix(PREFIX).split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            _remove(folder, attempts=1)


@contextmanager
def group(max_tasks: int) -> Iterator[PidsGroup | None]:
    """A fresh cgroup with pids.max = max_tasks for one child, removed afterwards; None where
    cgroups cannot be used (the caller then relies on RLIMIT_NPROC)."""
    parent = _parent()
    if parent is None:
        yield None
        return
    _sweep(parent)
    path = parent / f"{PREFIX}{os.getpid()}-{next(_counter)}"
    try:
        path.mkdir()
        (path / "pids.max").write_text(str(max_tasks))
    except OSError:  # a controller that refuses (a delegated or read-only hierarchy)
        if path.is_dir():
            _remove(path, attempts=1)
        yield None
        return
    try:
        yield PidsGroup(path)
    finally:
        _remove(path)
