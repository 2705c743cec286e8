"""A cgroup per child: the process-count limit that also holds when the service is root, and for
GPU children the resident-memory limit.

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

GPU children get a memory cgroup as well (memory.max on v2, memory.limit_in_bytes on v1's own
memory hierarchy): RLIMIT_AS counts the CUDA driver's address-space reservations, so an FP32
ResNet-50 at batch 1024 with 3.5 GB resident was refused at 64 GB of address space on an H200.
The cgroup counts what the child really holds; when it goes past, the kernel's OOM killer ends the
child and memory.events / memory.oom_control say so, which becomes the memory-limit sentence.
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
V1_MEMORY = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")
GROUP = "optiboard"
PREFIX = "child-"
# replaces itself with the real command once its pid is in the cgroups; $1 lists their cgroup.procs
SHIM = 'for f in $1; do echo $$ > "$f" || exit 125; done; shift; exec "$@"'
_counter = itertools.count()


@dataclass(frozen=True)
class PidsGroup:
    """One child's cgroup folder, and its memory cgroup when it has one (v2: the same folder)."""

    path: Path
    memory: Path | None = None

    def wrap(self, argv: list[str]) -> list[str]:
        """argv run inside this cgroup from its first instruction on."""
        folders = dict.fromkeys(p for p in (self.path, self.memory) if p is not None)
        procs = " ".join(str(folder / "cgroup.procs") for folder in folders)
        return ["/bin/sh", "-c", SHIM, "sh", procs, *argv]

    def limit_hit(self) -> bool:
        """True once a fork or thread start in the child was refused by pids.max."""
        return self.refusals() > 0

    def refusals(self) -> int:
        """Forks and thread starts refused by pids.max so far (a fork server's, call by call)."""
        return _count(self.path / "pids.events", "max")

    def out_of_memory(self) -> bool:
        """True once the kernel OOM-killed a task of the child for passing its memory limit."""
        if self.memory is None:
            return False
        v2 = self.memory == self.path  # v1 keeps memory in a hierarchy of its own
        events = self.memory / ("memory.events" if v2 else "memory.oom_control")
        return _count(events, "oom_kill") > 0


def _count(path: Path, key: str) -> int:
    """One counter of a cgroup's 'name value' lines (pids.events, memory.events, oom_control)."""
    try:
        text = path.read_text()
    except OSError:
        return 0
    counts = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
    return int(counts.get(key, "0"))


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
            if "memory" in controllers.read_text().split():
                _enable_v2_memory(parent)
            return parent
    except OSError:
        return None
    return None


def _enable_v2_memory(parent: Path) -> None:
    try:
        (V2_ROOT / "cgroup.subtree_control").write_text("+memory")
        (parent / "cgroup.subtree_control").write_text("+memory")
    except OSError:  # memory_parent() then finds no memory.max and says so
        pass


@functools.cache
def _memory_parent() -> Path | None:
    """Where the children's memory cgroups go: v1's memory hierarchy, or v2's pids folder when
    the memory controller is enabled there; None where none can be made."""
    parent = _parent()
    try:
        if (V1_MEMORY / "tasks").exists() and _writable(V1_MEMORY):
            memory = V1_MEMORY / GROUP
            memory.mkdir(exist_ok=True)
            return memory
        if parent is not None and parent.parent == V2_ROOT:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            return parent if "memory" in enabled else None
    except OSError:
        return None
    return None


def memory_available() -> bool:
    """Whether GPU children get a resident-memory cgroup here."""
    return _memory_parent() is not None


def available() -> bool:
    """Whether children get a pids cgroup here (else RLIMIT_NPROC is the only process limit)."""
    return _parent() is not None


def process_cap() -> str:
    """What caps a child's processes and threads here: "pids cgroup", "RLIMIT_NPROC", or "none"
    for a root service that can make no pids cgroup (the kernel does not enforce RLIMIT_NPROC
    for root)."""
    if available():
        return "pids cgroup"
    return "none" if os.geteuid() == 0 else "RLIMIT_NPROC"


def uncapped_reason() -> str | None:
    """Why children's processes and threads are not capped on this host, or None."""
    if process_cap() != "none":
        return None
    return (
        "This service runs as root and can make no pids cgroup, so its children's processes and "
        "threads are not capped (the kernel does not enforce RLIMIT_NPROC for root): run it as "
        "an ordinary user, give it a writable /sys/fs/cgroup, or cap its container "
        "(docker run --pids-limit 4096)."
    )


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
def group(max_tasks: int | None, memory_bytes: int | None = None) -> Iterator[PidsGroup | None]:
    """A fresh cgroup with pids.max = max_tasks (None: no cap, a group only to find what is
    left of the child) for one child, removed afterwards; None where cgroups cannot be used (the
    caller then relies on RLIMIT_NPROC). memory_bytes: also a resident-memory limit (group.memory
    is None where no memory cgroup could be made)."""
    parent = _parent()
    if parent is None:
        yield None
        return
    _sweep(parent)
    name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
    path = parent / name
    try:
        path.mkdir()
        (path / "pids.max").write_text("max" if max_tasks is None else str(max_tasks))
    except OSError:  # a controller that refuses (a delegated or read-only hierarchy)
        if path.is_dir():
            _remove(path, attempts=1)
        yield None
        return
    memory = _memory_group(name, memory_bytes) if memory_bytes else None
    try:
        yield PidsGroup(path, memory)
    finally:
        _remove(path)
        if memory is not None and memory != path:
            _remove(memory)


def _memory_group(name: str, limit: int) -> Path | None:
    """The child's memory cgroup with its limit (swap held at the same total), or None."""
    parent = _memory_parent()
    if parent is None:
        return None
    v2 = parent.parent == V2_ROOT
    path = parent / name
    try:
        if v2:
            (path / "memory.max").write_text(str(limit))
            if (path / "memory.swap.max").exists():
                (path / "memory.swap.max").write_text("0")
            return path
        _sweep(parent)
        path.mkdir()
        (path / "memory.limit_in_bytes").write_text(str(limit))
        if (path / "memory.memsw.limit_in_bytes").exists():
            (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
        return path
    except OSError:
        if not v2 and path.is_dir():
            _remove(path, attempts=1)
        return None
