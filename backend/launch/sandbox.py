"""bubblewrap sandbox for children that touch untrusted files (SavedModel conversion, parsing).

The child sees a read-only view of only what Python needs (system libraries, the interpreter, the
venv, the project's code and the input paths it is given), one fresh scratch folder as its only
writable place, an empty environment apart from PATH/HOME/PYTHONPATH and the parsing caps among
the OPTIBOARD_* settings, no network (every namespace
unshared), its own session, and it dies with its parent. The resource limits of limits.py are set
by the child itself before it runs (see children.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import settings

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/nsswitch.conf")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# the only settings a sandboxed child sees (parsing caps); never the database URL or secrets
PASSED_SETTINGS = (
    settings.MAX_INPUT_MB,
    settings.MAX_COMPRESSION_RATIO,
    settings.MAX_UPLOAD_MB,
    settings.MAX_UNCOMPRESSED_MB,
    settings.MAX_ZIP_MEMBERS,
)


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


def command(
    argv: Sequence[str], scratch: Path, read_only: Sequence[Path] = (), binary: str | None = None
) -> list[str]:
    """The bwrap command line that runs argv (a Python command) inside the sandbox."""
    root = settings.PROJECT_ROOT
    code = [root / "backend", root / "settings.py"]
    args = [
        binary or available().binary,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--setenv", "PATH", SANDBOX_PATH,
        "--setenv", "HOME", str(scratch),
        "--setenv", "TMPDIR", str(scratch),
        "--setenv", "PYTHONPATH", str(root),
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--proc", "/proc",
        "--dev", "/dev",
    ]  # fmt: skip
    for setting in PASSED_SETTINGS:
        if setting.name in os.environ:
            args += ["--setenv", setting.name, os.environ[setting.name]]
    paths = [Path(p) for p in SYSTEM_DIRS + SYSTEM_FILES]
    paths += [*_python_paths(), *code, *(Path(p) for p in read_only)]
    args += _mounts(sorted(paths, key=lambda p: len(p.parts)), "--ro-bind")  # parents first
    args += ["--bind", str(scratch), str(scratch), "--remount-ro", "/"]  # scratch stays writable
    args += ["--chdir", str(scratch), "--", *argv]
    return args


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


def available() -> Availability:
    """Checked once per configured binary: bwrap exists AND a trial child runs inside it."""
    return _check(settings.BWRAP.get())
