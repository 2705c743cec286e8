"""Child-side probes for the sandbox tests; imports nothing the sandbox does not show."""

from __future__ import annotations

import ctypes
import errno
import os
import socket
from pathlib import Path


def try_writes(paths: list[str]) -> dict[str, str]:
    """'written' or the error's type, for each path."""
    found = {}
    for path in paths:
        try:
            Path(path).write_text("escaped")
            found[path] = "written"
        except OSError as exc:
            found[path] = type(exc).__name__
    return found


def try_reads(paths: list[str]) -> dict[str, str]:
    """'read' or the error's type, for each path (a folder is listed)."""
    found = {}
    for path in paths:
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                with open(path, "rb") as file:
                    file.read(1)
            found[path] = "read"
        except OSError as exc:
            found[path] = type(exc).__name__
    return found


def listings(paths: list[str]) -> dict[str, object]:
    """Each folder's entries, sorted, or the error's type."""
    found: dict[str, object] = {}
    for path in paths:
        try:
            found[path] = sorted(os.listdir(path))
        except OSError as exc:
            found[path] = type(exc).__name__
    return found


def capabilities() -> dict[str, int]:
    """This process's capability sets, from its own /proc status."""
    names = ("CapEff", "CapPrm", "CapBnd", "CapAmb")
    lines = Path("/proc/self/status").read_text().splitlines()
    return {k: int(v, 16) for k, _, v in (x.partition(":\t") for x in lines) if k in names}


def unix_connect(path: str) -> str:
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)
            return "connected"
    except OSError as exc:
        return type(exc).__name__


def udp_send(port: int) -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.sendto(b"probe", ("127.0.0.1", port))
            return "sent"
    except OSError as exc:
        return type(exc).__name__


def leave_in(folder: str, kind: str, target: str) -> str:
    """What a child an upload took over could leave in its output folder for its parent to
    read on the host: a link to `target`, or a FIFO that blocks whoever opens it."""
    made = Path(folder) / "model.onnx"
    if kind == "link":
        made.symlink_to(target)
    else:
        os.mkfifo(made)
    return "left"


def environment() -> dict[str, str]:
    return dict(os.environ)


def connect(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return "connected"
    except OSError as exc:
        return type(exc).__name__


def load_savedmodel(path: str) -> None:
    import tensorflow as tf

    tf.saved_model.load(path)


def fork_bomb(count: int) -> int:
    """Fork up to `count` sleeping children (bounded, and each exits by itself within seconds);
    returns how many it started when nothing stopped it."""
    import time

    started = 0
    for _ in range(count):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        started += 1
    return started


def isolation(paths: list[str]) -> dict[str, object]:
    """What the child sees: its namespaces, which paths exist, which it can write."""
    writable = {}
    for path in paths:
        try:
            probe = Path(path) / ".probe" if Path(path).is_dir() else Path(path)
            with open(probe, "a"):
                pass
            writable[path] = True
        except OSError:
            writable[path] = False
    return {
        "mnt": os.readlink("/proc/self/ns/mnt"),
        "net": os.readlink("/proc/self/ns/net"),
        "exists": {path: os.path.exists(path) for path in paths},
        "writable": writable,
        "root": sorted(os.listdir("/root")) if os.path.isdir("/root") else None,
    }


def optional_imports() -> dict[str, bool]:
    """What keras and transformers see of scikit-learn here: whether it can be found, and
    whether importing it works (keras catches the ImportError)."""
    import importlib.util

    try:
        import sklearn  # noqa: F401
    except ImportError:
        imported = False
    else:
        imported = True
    return {"found": importlib.util.find_spec("sklearn") is not None, "imported": imported}


def threads_after_numpy() -> int:
    """The child's threads once numpy (and with it OpenBLAS) is loaded."""
    import numpy  # noqa: F401

    return len(os.listdir("/proc/self/task"))


def process_facts() -> dict[str, object]:
    """What a call's process holds: its pid and parent, its open descriptors, its folder, its
    environment's HOME and TMPDIR, and whether numpy was imported before the call."""
    import sys
    import tempfile

    return {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "cwd": os.getcwd(),
        "home": os.environ.get("HOME"),
        "tmp": tempfile.gettempdir(),
        "numpy_before": "numpy" in sys.modules,
        "threads": len(os.listdir("/proc/self/task")),
        "parents_fds": _opened(f"/proc/{os.getppid()}/fd"),
        "clear_refs": _writable("/proc/self/clear_refs"),
    }


def _opened(folder: str) -> dict[str, str]:
    """For each descriptor listed in `folder`, whether this process could open it to write."""
    found = {}
    for name in sorted(os.listdir(folder)):
        try:
            os.close(os.open(f"{folder}/{name}", os.O_WRONLY))
            found[name] = "opened"
        except OSError as exc:
            found[name] = type(exc).__name__
    return found


def _writable(path: str) -> bool:
    try:
        Path(path).write_text("5")
    except OSError:
        return False
    return True


def sleep_for(seconds: float) -> None:
    import time

    time.sleep(seconds)


def crash() -> None:
    """Die the way a runtime's segfault does."""
    import signal

    os.kill(os.getpid(), signal.SIGSEGV)


def allocate(gigabytes: int) -> int:
    return len(bytearray(gigabytes << 30))


def spin() -> None:
    while True:
        pass


def refuse(sentence: str) -> None:
    from backend.errors import UserError

    raise UserError(sentence)


def remember(value: str) -> str | None:
    """Keep `value` in this module for a later call in the same process; what the last call
    left (None in a fresh process)."""
    global _REMEMBERED
    before = globals().get("_REMEMBERED")
    _REMEMBERED = value
    return before


def remount_writable(folder: str) -> dict[str, object]:
    """Try to make a read-only bind writable and write into it, as a child that took over its
    process would; its effective capabilities, and what each step gave."""
    import subprocess

    status = Path("/proc/self/status").read_text()
    effective = next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff"))
    mount = subprocess.run(
        ["mount", "-o", "remount,bind,rw", folder], capture_output=True, text=True, check=False
    )
    try:
        (Path(folder) / "escaped").write_text("escaped")
        written = True
    except OSError:
        written = False
    return {"capabilities": effective, "remounted": mount.returncode == 0, "written": written}


def leave_behind(marker: str) -> int:
    """Start a process that outlives this call and would write `marker` in 3 s; its pid."""
    pid = os.fork()
    if pid == 0:
        import time

        time.sleep(3)
        Path(marker).write_text("still here")
        os._exit(0)
    return pid


def kernel_settings_writable() -> dict[str, object]:
    """Whether this process may write the kernel's settings: printk_ratelimit written with the
    value it holds (a no-op if it succeeds), and write access to SysRq asked, never used."""
    setting = Path("/proc/sys/kernel/printk_ratelimit")
    try:
        setting.write_text(setting.read_text())
        written = True
    except OSError:
        written = False
    sysrq = "/proc/sysrq-trigger"
    return {"sysctl": written, "sysrq": os.path.exists(sysrq) and os.access(sysrq, os.W_OK)}


def own_user_namespace() -> str:
    """What unshare(CLONE_NEWUSER) gives this process: 'made' or the error's name."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) == 0:  # CLONE_NEWUSER
        return "made"
    return errno.errorcode[ctypes.get_errno()]


def exploit_interfaces() -> dict[str, str]:
    """Each call the seccomp filter refuses, by x86-64's own numbers, made so that the kernel
    rejects it harmlessly when it is allowed, and its errno name ('ok' where it succeeded); an
    x32 getpid last."""
    libc = ctypes.CDLL(None, use_errno=True)
    calls = {
        "io_uring_setup": (425, 1, 0),  # no parameters: EFAULT when allowed
        "io_uring_enter": (426, -1, 0, 0, 0, 0, 0),  # no such ring: EBADF
        "io_uring_register": (427, -1, 0, 0, 0),
        "add_key": (248, 0, 0, 0, 0, 0),  # no key type: EFAULT
        "request_key": (249, 0, 0, 0, 0),
        "keyctl": (250, 0x7FFF, 0),  # no such operation
        "bpf": (321, 0x7FFF, 0, 0),  # no such command
        "perf_event_open": (298, 0, 0, -1, -1, 0),  # no attributes: EFAULT
        "userfaultfd": (323, 0x7FFF),  # no such flags
        "ptrace": (101, 0x7FFF, 0, 0, 0),  # no such request, no such process
        "x32 getpid": (0x40000000 | 39,),
    }
    found = {}
    for name, (number, *args) in calls.items():
        done = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
        found[name] = "ok" if done >= 0 else errno.errorcode[ctypes.get_errno()]
    return found


def uncapped_reason() -> str | None:
    """pids.uncapped_reason() as this process sees its host."""
    from backend.launch import pids

    return pids.uncapped_reason()


def isolation_here() -> dict[str, object]:
    """isolation.this_host() as this process sees its host."""
    from backend.launch import isolation

    return isolation.this_host().to_dict()


def runtimes_loaded_home(model: str) -> list[str]:
    """What ONNX Runtime (a session run) and OpenVINO (its import) leave in this child's HOME."""
    import numpy as np
    import onnxruntime
    import openvino  # noqa: F401

    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.ones((1, 16), np.float32)})
    home = Path(os.environ["HOME"])
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
