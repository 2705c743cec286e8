"""The seccomp filter every child sets on itself before it runs (limits.apply), sandboxed or not,
and every sandboxed service (a Triton server) through `python -m backend.launch.syscalls`.

It refuses, with EPERM, the kernel interfaces that no measurement, parse, conversion or
generation uses and that most kernel exploits start from: io_uring, the key rings, BPF, perf
events, userfaultfd and ptrace (Docker's default profile refuses each of them to a process
without capabilities too). A denylist by number holds only for the calls of its own table, so a
call made through another one (32-bit calls on x86-64 or arm64, x32 calls) is refused whole.
Nothing is compiled: the filter is a few classic BPF instructions, written out below.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import signal
import struct
import sys
from pathlib import Path

log = logging.getLogger(__name__)

DENIED = (
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "add_key",
    "request_key",
    "keyctl",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "ptrace",
)
# also refused to a confined child (no bubblewrap, so no network namespace of its own): Landlock
# leaves UDP and pathname Unix sockets open (PostgreSQL's, whose peer authentication takes the
# service's own user), and no parse needs a socket
NO_SOCKETS = ("socket",)
# (AUDIT_ARCH_*, its syscall numbers) per machine; io_uring's numbers are the same everywhere
TABLES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "ptrace": 101,
            "socket": 41,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "ptrace": 117,
            "socket": 198,
        },
    ),
}
X32_BIT = 0x40000000  # x86-64's x32 calls: the same arch word, this bit set in the number
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
RET_ALLOW = 0x7FFF0000
RET_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
JUMP_IF_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JUMP_IF_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
RETURN = 0x06  # BPF_RET | BPF_K
NUMBER_AT, ARCH_AT = 0, 4  # offsets in struct seccomp_data


def program(arch: int, numbers: list[int]) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jump if true, jump if false, k): another table's call or a denied
    number returns EPERM, anything else is allowed."""
    denied = len(numbers) + 5  # the EPERM return's index (4 steps, the numbers, the allow)
    steps = [(LOAD_WORD, 0, 0, ARCH_AT), (JUMP_IF_EQUAL, 0, denied - 2, arch)]
    steps += [(LOAD_WORD, 0, 0, NUMBER_AT), (JUMP_IF_AT_LEAST, denied - 4, 0, X32_BIT)]
    for at, number in enumerate(numbers):
        steps.append((JUMP_IF_EQUAL, denied - (5 + at), 0, number))
    return [*steps, (RETURN, 0, 0, RET_ALLOW), (RETURN, 0, 0, RET_EPERM)]


class _Program(ctypes.Structure):
    _fields_ = [("length", ctypes.c_ushort), ("steps", ctypes.c_void_p)]


def refuse_exploit_interfaces(also: tuple[str, ...] = ()) -> bool:
    """Install the filter on this process and its future children (it cannot be lifted), with
    the calls named in `also` refused too; False, with a log line, on a machine whose syscall
    table is not written out above."""
    machine = platform.machine()
    if machine not in TABLES:
        log.warning("no seccomp filter for %s: children run without one", machine)
        return False
    arch, table = TABLES[machine]
    steps = program(arch, [table[name] for name in (*DENIED, *also)])
    packed = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *s) for s in steps))
    filter_ = _Program(len(steps), ctypes.cast(packed, ctypes.c_void_p))
    prctl(PR_SET_NO_NEW_PRIVS, 1, name="PR_SET_NO_NEW_PRIVS")
    pointer = ctypes.cast(ctypes.pointer(filter_), ctypes.c_void_p).value or 0
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, pointer, name="PR_SET_SECCOMP")
    return True


def prctl(option: int, *args: int, name: str) -> None:
    """prctl(2) on this process, its arguments as the unsigned longs it reads (zeros after
    `args`); OSError naming the option when the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    padded = [ctypes.c_ulong(a) for a in (*args, 0, 0, 0, 0)[:4]]
    if libc.prctl(option, *padded) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({name}) failed")


PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CAPABILITY_VERSION_3 = 0x20080522


def drop_capabilities() -> None:
    """Hold no capability, now or after an exec (what bubblewrap's --cap-drop ALL gives a child
    of a root service); a process that holds none already changes nothing."""
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for capability in range(last + 1):
        try:
            prctl(PR_CAPBSET_DROP, capability, name="PR_CAPBSET_DROP")
        except OSError:  # EPERM without CAP_SETPCAP: a process that cannot drop them holds none
            break
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, name="PR_CAP_AMBIENT")
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    empty = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; two words each
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capset(header, empty) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def exec_filtered(argv: list[str]) -> None:
    """Become argv (a program that is not a Python child of ours) with the filter set: a filter
    outlives exec, and no new privileges means argv cannot drop it through a set-uid program."""
    refuse_exploit_interfaces()
    for ignored_by_python in (signal.SIGPIPE, signal.SIGXFSZ):  # as subprocess restores them
        signal.signal(ignored_by_python, signal.SIG_DFL)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    exec_filtered(sys.argv[1:])
