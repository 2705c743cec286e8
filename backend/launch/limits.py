"""Resource limits applied inside every child before it runs, and the sentence for each one hit.

Memory is RLIMIT_AS (address space; the CUDA driver reserves ~14 GB of it, so the default never
goes below CUDA_ADDRESS_SPACE on an NVIDIA host, and a lower OPTIBOARD_CHILD_MEMORY_MB stops CUDA
from starting) for CPU children. GPU children (gpu=True) get no RLIMIT_AS: the CUDA driver maps
address space far beyond what it uses (an FP32 ResNet-50 at batch 1024 with 3.5 GB resident went
past 64 GB), so the same number limits their resident memory through a memory cgroup (pids.py)
where one can be made, and where none can their host memory is unlimited and the result says so.
CPU is RLIMIT_CPU (SIGXCPU at the soft limit, SIGKILL five
seconds later), file size is RLIMIT_FSIZE (Python ignores SIGXFSZ, so a write past it raises
OSError EFBIG). RLIMIT_NPROC counts every process *and thread* of the user on the whole host, so a
fixed small cap would break ONNX Runtime's and TensorFlow's thread pools (and count the
dashboard's threads against the child); the child gets the user's current count plus
OPTIBOARD_CHILD_PROCS instead, which stops a fork bomb and leaves thread pools alone. The kernel
does not enforce RLIMIT_NPROC for root, so for root the cap comes from a pids cgroup per child
(pids.py) wherever one can be made. PR_SET_PDEATHSIG(SIGKILL) makes a child die with the worker
or dashboard that started it, even when that one is SIGKILLed.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import settings
from backend.launch import landlock
from backend.launch.syscalls import (
    NO_SOCKETS,
    drop_capabilities,
    prctl,
    refuse_exploit_interfaces,
)
from backend.vendortelemetry import ORT_OPT_OUT

MB = 1 << 20
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
CPU_GRACE_S = 5  # between SIGXCPU (soft) and SIGKILL (hard)
# Measured on an H200 host: the CUDA driver's cuInit + context reserve ~14 GB of address space
# (VmPeak), so cuInit fails under RLIMIT_AS of 8 GB and works at 16 GB.
CUDA_ADDRESS_SPACE = 16 << 30
OUT_OF_MEMORY_MARKERS = ("bad_alloc", "bad allocation", "Failed to allocate memory", "MemoryError")
# numpy's OpenBLAS starts a thread per core that busy-waits after it starts and after each call it
# shares (0.13 of a child's 0.39 CPU-s to import numpy, onnx and onnxruntime on a 2-core host). No
# child needs BLAS threads (the runtimes it measures run their own pools), and a spinning one takes
# a core from them, so every child gets one. ONNX Runtime's telemetry opt-out too, for a child that
# loads it without importing backend first (the Triton server's Python backend).
CHILD_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1", **ORT_OPT_OUT}


@dataclass(frozen=True)
class ChildLimits:
    """The limits one child runs under; sent to the child as JSON on its command line."""

    memory_bytes: int
    cpu_s: int
    file_bytes: int
    extra_procs: int
    gpu: bool = False  # memory_bytes is then resident memory (a cgroup), not address space
    # the files a child outside the sandbox may touch (Landlock), for one reading an untrusted file
    confine: landlock.Confinement | None = None

    @classmethod
    def from_settings(cls, gpu: bool = False) -> ChildLimits:
        memory_mb = settings.CHILD_MEMORY_MB.get()
        memory = memory_mb * MB if memory_mb > 0 else _default_memory_bytes()
        return cls(
            memory_bytes=memory,
            cpu_s=settings.CHILD_CPU_S.get(),
            file_bytes=settings.CHILD_FILE_MB.get() * MB,
            extra_procs=settings.CHILD_PROCS.get(),
            gpu=gpu,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChildLimits:
        confine = data.get("confine")
        fields = {**data, "confine": landlock.Confinement.from_dict(confine) if confine else None}
        return cls(**fields)


def _ram_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _default_memory_bytes() -> int:
    """Half of RAM; on an NVIDIA host at least CUDA_ADDRESS_SPACE, or CUDA cannot start."""
    half = _ram_bytes() // 2
    return max(half, CUDA_ADDRESS_SPACE) if Path("/dev/nvidiactl").exists() else half


def _user_tasks(uid: int) -> int:
    """Processes and threads the real user owns now (what RLIMIT_NPROC counts)."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":", 1) for line in status.read_text().splitlines() if ":" in line
            )
        except OSError:  # the process ended while we looked
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            count += int(fields.get("Threads", "1"))
    return count


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG(SIGKILL); if the parent is already gone, die now rather than linger."""
    parent = os.getppid()
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, name="PR_SET_PDEATHSIG")
    if os.getppid() != parent:
        os._exit(1)


def set_dumpable(dumpable: bool) -> None:
    """PR_SET_DUMPABLE: off, another process of the same user without CAP_SYS_PTRACE (none in
    the sandbox has it) can neither trace this one nor open its /proc files (its descriptors)."""
    prctl(PR_SET_DUMPABLE, int(dumpable), name="PR_SET_DUMPABLE")


def apply(limits: ChildLimits, processes: bool = True) -> None:
    """Set every limit on this process (the child) before it does any real work. processes
    False: all but the process count, which a fork server's forks set when they start (the
    count is the user's at that moment, backend/launch/forks.py)."""
    die_with_parent()
    if not limits.gpu:  # a GPU child's memory is its cgroup's (see the module's docstring)
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + CPU_GRACE_S))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    if processes:
        limit_processes(limits.extra_procs)
    if limits.confine is not None:  # what bubblewrap would have given it, as far as it can
        drop_capabilities()
        if limits.confine.landlock:
            landlock.restrict(limits.confine)
    # last: inherited by every process the child starts; a confined child makes no socket
    refuse_exploit_interfaces(NO_SOCKETS if limits.confine is not None else ())


def limit_processes(extra_procs: int) -> None:
    """RLIMIT_NPROC at the user's current count plus extra_procs (see the module's docstring)."""
    procs = _user_tasks(os.getuid()) + extra_procs
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard != resource.RLIM_INFINITY:
        procs = min(procs, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (procs, procs))


def memory_sentence(what: str, limits: ChildLimits) -> str:
    kind = "resident-memory limit" if limits.gpu else "memory limit"
    return (
        f"{what} ran out of its {kind} of {limits.memory_bytes // MB} MB "
        "(OPTIBOARD_CHILD_MEMORY_MB); use a smaller model, batch or input size, or raise the limit."
    )


def unlimited_memory_note(what: str) -> str:
    """What a GPU child's result says when no memory cgroup could hold it."""
    return (
        f"{what} ran with unlimited host memory: a GPU child gets no address-space limit "
        "(RLIMIT_AS counts the CUDA driver's mappings, tens of GB beyond what it uses), and no "
        "memory cgroup could be made here (the service needs write access to /sys/fs/cgroup)."
    )


def cpu_sentence(what: str, limits: ChildLimits) -> str:
    return (
        f"{what} used up its CPU-time limit of {limits.cpu_s} s (OPTIBOARD_CHILD_CPU_S); "
        "use a smaller model or a shorter measurement, or raise the limit."
    )


def file_sentence(what: str, limits: ChildLimits) -> str:
    return (
        f"{what} tried to write a file over the size limit of {limits.file_bytes // MB} MB "
        "(OPTIBOARD_CHILD_FILE_MB); use a smaller model or raise the limit."
    )


def limit_hit_by_exception(exc: BaseException) -> str | None:
    """'memory', 'file' or 'procs' when an exception in the child means a limit was hit."""
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return "file"
    text = str(exc)
    if isinstance(exc, BlockingIOError) and exc.errno == errno.EAGAIN and exc.filename is None:
        return "procs"  # fork() refused (a non-blocking read would not end the child)
    if isinstance(exc, RuntimeError) and text == "can't start new thread":
        return "procs"
    if any(marker in text for marker in OUT_OF_MEMORY_MARKERS):
        return "memory"
    return None


def limit_hit_by_exit(returncode: int, output: str) -> str | None:
    """'memory', 'cpu', 'file' or 'killed' from how a child ended, else None."""
    if returncode == -signal.SIGXCPU:
        return "cpu"
    if returncode == -signal.SIGXFSZ:
        return "file"
    if any(marker in output for marker in OUT_OF_MEMORY_MARKERS):
        return "memory"  # C++ code aborting on std::bad_alloc
    if returncode == -signal.SIGKILL:
        return "killed"
    return None


def procs_sentence(what: str, limits: ChildLimits) -> str:
    return (
        f"{what} tried to start more than {limits.extra_procs} processes and threads "
        "(OPTIBOARD_CHILD_PROCS); use a model or runtime setting with fewer threads, or raise "
        "the limit."
    )


def sentence(kind: str, what: str, limits: ChildLimits) -> str:
    """One sentence that names the limit a child hit."""
    if kind == "procs":
        return procs_sentence(what, limits)
    if kind == "memory":
        return memory_sentence(what, limits)
    if kind == "cpu":
        return cpu_sentence(what, limits)
    if kind == "file":
        return file_sentence(what, limits)
    if kind == "links":
        return (
            f"{what} left a link or a special file in its output folder, which only a child "
            "the model took over does; nothing it made is used."
        )
    return (
        f"{what} was killed (SIGKILL): it went past the hard CPU-time limit of "
        f"{limits.cpu_s + CPU_GRACE_S} s or the host ran out of memory; use a smaller model or "
        "input, or lower OPTIBOARD_CHILD_MEMORY_MB so the child fails before the host does."
    )
