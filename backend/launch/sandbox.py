"""bubblewrap sandbox for children that touch untrusted files: SavedModel conversion, parsing,
measurement children (ONNX Runtime / OpenVINO sessions on uploaded models) and Triton servers.

The child sees a read-only view of only what it needs (system libraries, the interpreter, the
venv, the project's code and the input paths it is given), one fresh scratch folder and the
output folders it is given as its only writable places, an empty environment apart from
PATH/HOME/PYTHONPATH, the parsing caps among the OPTIBOARD_* settings and what its caller passes,
no network (every namespace unshared; a Triton server keeps the host's network namespace for its
loopback ports), no capabilities (also when the service runs as root), no user namespace of its
own (where bubblewrap can forbid them), the kernel's settings (/proc/sys) read-only, its own
session, and it dies with its parent. A child that uses a GPU also gets the GPU device nodes and
a read-only /sys; every child sees the CPU topology, and only a child that measures
(Binds.energy) RAPL's energy counters (/sys/class/powercap), read-only. The resource limits of
limits.py are set by the child itself before it runs (see children.py).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import settings
from backend.errors import UnavailableError
from backend.launch import landlock
from backend.launch.limits import CHILD_ENVIRONMENT

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/nsswitch.conf")
# the CPU topology and caches ONNX Runtime and OpenVINO size their thread pools and streams from
CPU_TOPOLOGY = "/sys/devices/system/cpu"
# RAPL's energy counters, read-only, for a measurement child's energy (backend/energy), and for
# no other child: a power side channel (CVE-2020-8694) where the host leaves them readable to the
# service's user; the class folder holds links into the devices folder; absent folders are skipped
ENERGY_COUNTERS = ("/sys/class/powercap", "/sys/devices/virtual/powercap")
# NVIDIA's control, per-GPU, unified-memory, modeset and capability nodes; DRI for other GPUs
GPU_DEVICE_PATTERNS = ("nvidia*", "nvidia-caps", "dri")
# where the GPU driver and CUDA find devices and libraries; passed through when set
GPU_ENVIRONMENT = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# the kernel's settings and SysRq: a child running as uid 0 (a service run as root) needs no
# capability to write most of /proc/sys, and a write there is the host's (core_pattern runs a
# program as the host's root); bubblewrap's fresh /proc leaves both writable, so they are bound
# read-only over it, as Docker does
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger")
log = logging.getLogger(__name__)
# the only settings a sandboxed child sees (parsing caps); never the database URL or secrets
PASSED_SETTINGS = (
    settings.MAX_INPUT_MB,
    settings.MAX_COMPRESSION_RATIO,
    settings.MAX_UPLOAD_MB,
    settings.MAX_UNCOMPRESSED_MB,
    settings.MAX_ZIP_MEMBERS,
)


@dataclass(frozen=True)
class Binds:
    """What one sandboxed child gets beyond Python and the project's code."""

    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()  # besides its scratch folder (outputs, caches)
    gpu: bool = False  # the GPU device nodes, a read-only /sys and the GPU environment
    share_net: bool = False  # the host's network namespace (a server's loopback ports)
    new_session: bool = True  # False: stays in its parent's process group (see command)
    env: tuple[tuple[str, str], ...] = ()  # extra environment variables
    private_tmp: bool = False  # an empty writable /tmp (Triton's Python backend writes there)
    energy: bool = False  # RAPL's energy counters, read-only: only for a child that measures

    @classmethod
    def of(
        cls,
        read_only: Sequence[Path | str | None] = (),
        writable: Sequence[Path | str | None] = (),
        **kwargs: object,
    ) -> Binds:
        """Absolute paths; None entries (an optional file not given) are skipped."""

        def clean(paths: Sequence[Path | str | None]) -> tuple[Path, ...]:
            return tuple(Path(p).absolute() for p in paths if p)  # bound where they are named

        return cls(clean(read_only), clean(writable), **kwargs)  # type: ignore[arg-type]


def gpu_devices(dev: Path = Path("/dev")) -> list[Path]:
    """The GPU device nodes present on this host (none on a host without a GPU)."""
    found: list[Path] = []
    for pattern in GPU_DEVICE_PATTERNS:
        found += sorted(dev.glob(pattern))
    return found


def _gpu_args() -> list[str]:
    args: list[str] = []
    for node in gpu_devices():
        args += ["--dev-bind", str(node), str(node)]
    args += ["--ro-bind", "/sys", "/sys"]  # NVML and the CUDA driver read PCI and module state
    for name in GPU_ENVIRONMENT:
        if name in os.environ:
            args += ["--setenv", name, os.environ[name]]
    return args


@dataclass(frozen=True)
class Availability:
    """Whether the sandbox works here; `reason` says why not, in words a user can act on."""

    ok: bool
    reason: str = ""
    binary: str = ""


def _mounts(paths: Sequence[Path], flag: str) -> list[str]:
    """--ro-bind/--bind for real paths; symlinked top-level dirs (/bin -> usr/bin) as symlinks."""
    args: list[str] = []
    seen: set[str] = set()
    for path in paths:
        text = str(path)
        if text in seen or not Path(text).exists():
            continue
        seen.add(text)
        if Path(text).is_symlink() and Path(text).parent == Path("/"):
            args += ["--symlink", str(Path(text).readlink()), text]
        else:
            args += [flag, str(Path(text).resolve()), text]
    return args


def _python_paths() -> list[Path]:
    """The interpreter's installation and the venv, where they live and where they point."""
    found = [Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent]
    found += [Path(sys.prefix).resolve()]
    return found


def environment(scratch: Path) -> dict[str, str]:
    """A sandboxed or confined child's whole environment: never the database URL or a secret."""
    env = {
        "PATH": SANDBOX_PATH,
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        # getpass.getuser() (torch's cache paths) reads these before the passwd file, which a
        # host may not hold the sandbox's uid in ("getpwuid(): uid not found: 0" on a GPU host)
        "LOGNAME": "optiboard",
        "USER": "optiboard",
        "PYTHONPATH": str(settings.PROJECT_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        **CHILD_ENVIRONMENT,
    }
    for setting in PASSED_SETTINGS:
        if setting.name in os.environ:
            env[setting.name] = os.environ[setting.name]
    return env


def visible_paths(read_only: Sequence[Path | str] = (), energy: bool = False) -> list[Path]:
    """What a child sees read-only: the system, Python, the project's code (no data), RAPL's
    counters for a child that measures energy, and read_only."""
    root = settings.PROJECT_ROOT
    code = [root / "backend", root / "storage", root / "settings.py"]
    counters = ENERGY_COUNTERS if energy else ()
    paths = [Path(p) for p in (*SYSTEM_DIRS, *SYSTEM_FILES, CPU_TOPOLOGY, *counters)]
    return [*paths, *_python_paths(), *code, *(Path(p) for p in read_only)]


def confinement(scratch: Path, binds: Binds) -> landlock.Confinement:
    """The sandbox's view as Landlock rules, for a child that runs where bubblewrap does not."""
    readable = [*visible_paths(binds.read_only, binds.energy), *landlock.READABLE_PROC]
    readable += landlock.READABLE_DEVICES
    writable = [scratch, *binds.writable, *landlock.WRITABLE_DEVICES]
    rules = tuple(map(str, readable)), tuple(map(str, writable))
    return landlock.Confinement(*rules, landlock=landlock.abi() > 0)


def command(
    argv: Sequence[str],
    scratch: Path,
    read_only: Sequence[Path] = (),
    binary: str | None = None,
    binds: Binds | None = None,
) -> list[str]:
    """The bwrap command line that runs argv inside the sandbox.

    --new-session (the default) puts the child in a session of its own, so it cannot push input
    into a terminal; a service started with its own session and no terminal (services.py) passes
    new_session=False so that signals to its process group reach every process of the server.
    """
    binds = binds or Binds()
    # run as root, bwrap keeps the caller's capabilities: with CAP_SYS_ADMIN a child remounted a
    # read-only bind writable and wrote to the host; dropped, nothing in the sandbox holds any
    binary = binary or available().binary
    args = [binary, "--die-with-parent", "--cap-drop", "ALL"]
    args += ["--unshare-all", "--share-net"] if binds.share_net else ["--unshare-all"]
    # a user namespace of its own gives its maker every capability inside it, the first step of
    # most kernel exploits (nf_tables in a new network namespace); unshare(CLONE_NEWUSER) worked
    # in here until 2026-12-06 and now fails (the nesting limit bwrap sets)
    args += ["--unshare-user", "--disable-userns"] if forbids_user_namespaces(binary) else []
    args += ["--new-session"] if binds.new_session else []
    args += ["--clearenv"]
    for name, value in environment(scratch).items():
        args += ["--setenv", name, value]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for path in PROC_READ_ONLY:  # over the fresh /proc, before anything else is bound
        args += ["--ro-bind-try", path, path]
    if binds.gpu:
        args += _gpu_args()
        if not binds.energy:  # the whole /sys is bound for the driver: the counters emptied
            for path in filter(os.path.isdir, ENERGY_COUNTERS):
                args += ["--tmpfs", path, "--remount-ro", path]
    for name, value in binds.env:  # after the GPU environment: the caller's values win
        args += ["--setenv", name, value]
    args += ["--tmpfs", "/tmp"] if binds.private_tmp else []  # before binds under /tmp
    paths = visible_paths((*read_only, *binds.read_only), binds.energy)
    args += _mounts(sorted(paths, key=lambda p: len(p.parts)), "--ro-bind")  # parents first
    writable = sorted({scratch, *binds.writable}, key=lambda p: len(p.parts))
    for folder in writable:  # after the read-only binds, so an output folder inside one is
        args += ["--bind", str(folder), str(folder)]  # still writable
    args += ["--remount-ro", "/", "--chdir", str(scratch), "--", *argv]
    return args


def service_command(argv: Sequence[str], folder: Path, binds: Binds) -> list[str]:
    """The bwrap command line of a service (a Triton server) that runs beside its parent until
    stopped: `folder` is its writable working folder, it stays in the process group that
    services.start_service makes (new_session off, so a SIGTERM to the group reaches the server
    itself and it can shut down gracefully), it gets an empty /tmp of its own, and its
    environment is binds.env on top of PATH and HOME. UnavailableError with the reason when no
    sandbox works here."""
    state = available()
    if not state.ok:
        raise UnavailableError(
            f"Uploaded models are served only inside the sandbox, but {state.reason}."
        )
    binds = dataclasses.replace(binds, new_session=False, private_tmp=True)
    filtered = [sys.executable, "-m", "backend.launch.syscalls", *argv]  # the children's filter
    sandboxed = command(filtered, Path(folder), binary=state.binary, binds=binds)
    # bwrap dies of a SIGTERM to the group, and --die-with-parent then SIGKILLs the server before
    # it has shut down; ignored before exec, SIGTERM reaches only the server (which handles it),
    # and bwrap exits when the server has. A SIGKILL to the group still ends everything.
    return ["/bin/sh", "-c", 'trap "" TERM; exec "$0" "$@"', *sandboxed]


@functools.cache
def forbids_user_namespaces(binary: str) -> bool:
    """Whether this bubblewrap forbids a child's own user namespaces here (--disable-userns: 0.8.0
    and later, and a host that lets it make the user namespace that needs); where not, children
    are still sandboxed, without that, as docs/security.md says."""
    probe = [binary, "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "/bin/true"]
    try:
        forbids = subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        forbids = False
    if not forbids:
        log.warning(
            "%s cannot forbid sandboxed children their own user namespaces here (that needs "
            "bubblewrap 0.8.0 or later and user namespaces); they are sandboxed without it",
            binary,
        )
    return forbids


def _trial(binary: str) -> str:
    """'' when a trivial Python child runs in the sandbox, else what went wrong."""
    with tempfile.TemporaryDirectory(prefix="optiboard-bwrap-") as folder:
        argv = [sys.executable, "-c", "import settings; print('sandbox ok')"]
        try:
            done = subprocess.run(
                command(argv, Path(folder), binary=binary),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
    if done.returncode == 0 and "sandbox ok" in done.stdout:
        return ""
    lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"


@functools.cache
def _check(configured: str) -> Availability:
    binary = shutil.which(configured)
    if binary is None:
        return Availability(
            False,
            f"the bubblewrap sandbox ({configured!r}) is not installed; install the Debian "
            "package bubblewrap or set OPTIBOARD_BWRAP to its path",
        )
    problem = _trial(binary)
    if problem:
        return Availability(
            False,
            f"the bubblewrap sandbox ({binary}) does not work here ({problem}); allow user "
            "namespaces or run the service where bubblewrap can create its sandbox",
            binary,
        )
    return Availability(True, "", binary)


def needed_for(doing: str) -> str:
    """'' where the sandbox works here; else the reason `doing` is refused, to end a sentence:
    "{doing} only inside the sandbox, and <why none works here>"."""
    state = available()
    return "" if state.ok else f"{doing} only inside the sandbox, and {state.reason}"


def available() -> Availability:
    """Checked once per configured binary: bwrap exists AND a trial child runs inside it."""
    return _check(settings.BWRAP.get())
