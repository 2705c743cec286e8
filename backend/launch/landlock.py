"""Landlock, the kernel's allow-list for files and TCP that an unprivileged process sets on itself.

Where bubblewrap cannot run (a container without user namespaces), a child that reads an
untrusted file (upload parsing, the compatibility matrix) still gets the sandbox's view of the
file system through it: it reads only the paths the sandbox would bind, writes only its scratch
folder, binds and connects no TCP port, and cannot signal or reach the abstract sockets of
processes outside it. Landlock also refuses it ptrace on processes outside; of /proc it reads only
its own folder and a few host-wide files (another process's environ, which Landlock alone leaves
readable, held the service's database URL). It needs Linux 5.13 or later with Landlock enabled;
each newer ABI adds rights (REFER 2, TRUNCATE 3, TCP 4, device ioctl 5, scopes 6), used where
present. Where the kernel has none, a confined child still gets the sandbox's environment and no
capabilities (limits.apply), and the worker's isolation summary says Landlock is missing.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
from dataclasses import dataclass
from typing import Any

from backend.launch.syscalls import PR_SET_NO_NEW_PRIVS, prctl

# the same numbers on every architecture (new syscalls share one table since Linux 5.1)
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # all a file rule may hold
READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
# the child's own /proc folder ("self" is opened by the child) and the host-wide files runtimes
# size their pools from; never another process's folder (its environ held the database URL)
READABLE_PROC = ("/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys")
# the device files bubblewrap's --dev gives a child, readable, and the one it may also write
READABLE_DEVICES = ("/dev/zero", "/dev/random", "/dev/urandom")
WRITABLE_DEVICES = ("/dev/null",)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel's header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class Confinement:
    """What a confined child may touch: read (and execute) these, read and write those; with
    landlock False (a kernel without it) only its environment and capabilities are confined."""

    readable: tuple[str, ...]
    writable: tuple[str, ...]
    landlock: bool = True

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Confinement:
        return cls(tuple(data["readable"]), tuple(data["writable"]), bool(data["landlock"]))


def _syscall(number: int, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.syscall(number, *args)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"landlock syscall {number}: {os.strerror(code)}")
    return result


@functools.cache
def abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (too old, disabled, or a seccomp
    profile that refuses the call)."""
    try:
        return _syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    except OSError:
        return 0


def unavailable_reason() -> str:
    """Why no child can be confined here; "" when Landlock works."""
    if abi() > 0:
        return ""
    return "this kernel offers no Landlock (Linux 5.13 or later with it enabled is needed)"


def _fs_rights(version: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE up to MAKE_SYM
    rights |= REFER if version >= 2 else 0
    rights |= TRUNCATE if version >= 3 else 0
    return rights | (IOCTL_DEV if version >= 5 else 0)


def restrict(confinement: Confinement) -> None:
    """Confine this process and all it starts later; OSError when the kernel refuses (the child
    then fails: it never runs unconfined when asked to be confined)."""
    version = abi()
    if version == 0:
        raise OSError(f"Landlock cannot confine this child: {unavailable_reason()}")
    handled = _fs_rights(version)
    scopes = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP, scopes)
    size = 8 if version < 4 else 16 if version < 6 else 24  # the fields this ABI reads
    ruleset = _syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    try:
        for paths, rights in ((confinement.readable, READ_RIGHTS), (confinement.writable, handled)):
            for path in paths:
                _allow(ruleset, path, rights & handled)
        prctl(PR_SET_NO_NEW_PRIVS, 1, name="PR_SET_NO_NEW_PRIVS")  # Landlock requires it
        _syscall(SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: str, rights: int) -> None:
    """One path-beneath rule; a path that does not exist is skipped, as bubblewrap's -try binds."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        _syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0)
    finally:
        os.close(fd)
