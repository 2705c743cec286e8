"""Each child's temporary folder: made fresh, removed by the parent whatever happened to the child;
and a job's own temporary folder (the outputs its children leave), kept beside them.

A parent that was SIGKILLed cannot remove its folders; the next parent sweeps them. Each folder's
owner holds a lock on the `<folder>.owner` file beside it, which the kernel lets go when the owner
dies: a folder whose lock anyone can take is an orphan. A pid would not do where two PID
namespaces share a volume (the worker and dashboard containers of one pod share the data folder,
not their pids).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from backend.vendortelemetry import decline_openvino

FOLDER_PREFIX = "optiboard-child-"


@dataclass(frozen=True)
class ChildFolder:
    """A child's temporary folder: `scratch` is the child's (its only writable place when
    sandboxed); the output files beside it belong to the parent."""

    root: Path

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"


def children_root() -> Path:
    return Path(tempfile.gettempdir()) / "optiboard-children"


OWNER_SUFFIX = ".owner"  # beside each folder: locked by its owner for the folder's whole life
UNLOCKED_GRACE_S = 60.0  # a folder with no lock file is an older version's, or being made


def _owner_file(folder: Path) -> Path:
    return folder.with_name(folder.name + OWNER_SUFFIX)  # beside it: the folder is all its user's


def _sweep_orphans(root: Path) -> None:
    """Remove folders whose owner is gone (it was SIGKILLed before its cleanup)."""
    for folder in root.glob(f"{FOLDER_PREFIX}*"):
        if not folder.is_dir():
            continue
        owner = _owner_file(folder)
        if owner.exists():
            _remove_if_unlocked(folder, owner)
        elif _old_and_pid_gone(folder):  # made before owners locked their folders
            shutil.rmtree(folder, ignore_errors=True)


def _remove_if_unlocked(target: Path, lock: Path) -> None:
    """Remove `target` (a folder, or an owned file that is its own lock) and `lock` when nobody
    holds the lock."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return  # removed meanwhile, or not ours to open
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)  # held: its owner lives (or this file system has no locks: never sweep)
        return
    try:
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        lock.unlink(missing_ok=True)
    finally:
        os.close(fd)


@contextmanager
def owned_file(directory: Path, prefix: str) -> Iterator[tuple[BinaryIO, Path]]:
    """A temporary file (open for writing, and its path) beside where it will be renamed, locked
    until closed and removed unless renamed first; one a killed writer left (its lock free) goes
    when the next is made in that folder. Made under another name until it is locked."""
    for stale in directory.glob(f"{prefix}*"):
        _remove_if_unlocked(stale, stale)
    fd, made = tempfile.mkstemp(dir=directory, prefix=f".unlocked{prefix}")
    path = directory / Path(made).name.replace(f".unlocked{prefix}", prefix, 1)
    with os.fdopen(fd, "wb") as out:
        try:
            with suppress(OSError):  # no locks on this file system: it is never swept
                fcntl.flock(out.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(made, path)
            yield out, path
        finally:
            Path(made).unlink(missing_ok=True)
            path.unlink(missing_ok=True)  # gone already when it was renamed into place


def _old_and_pid_gone(folder: Path) -> bool:
    pid = folder.name.removeprefix(FOLDER_PREFIX).split("-", 1)[0]
    try:
        age = time.time() - folder.stat().st_mtime
    except OSError:
        return False
    return pid.isdigit() and age > UNLOCKED_GRACE_S and not Path(f"/proc/{pid}").exists()


@contextmanager
def child_folder() -> Iterator[ChildFolder]:
    """A fresh folder for one child, removed by the parent whatever happened to the child."""
    with owned_folder() as path:
        folder = ChildFolder(path)
        folder.scratch.mkdir()
        decline_openvino(folder.scratch)  # a child's HOME is its scratch folder
        yield folder


@contextmanager
def owned_folder(label: str = "", under: Path | None = None) -> Iterator[Path]:
    """A temporary folder of this process (a child's, a job's outputs, a node's), removed on exit
    and swept when this process was SIGKILLed before it could remove it: a variant model left in
    /tmp by a killed worker stayed there for good. `under`: another root than /tmp's (the data
    folder's tmp/, beside the store, where a finished folder is moved in without a copy)."""
    root = under or children_root()
    root.mkdir(parents=True, exist_ok=True)
    _sweep_orphans(root)
    prefix = f"{FOLDER_PREFIX}{os.getpid()}-" + (f"{label}-" if label else "")
    staging = Path(tempfile.mkdtemp(prefix=f".{prefix}", dir=root))  # unseen by sweeps until
    path = staging.with_name(staging.name.removeprefix("."))
    owner = _owner_file(path)
    lock = os.open(owner, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        with suppress(OSError):  # no locks on this file system: the folder is never swept
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        staging.rename(path)  # ...its owner holds the lock
        yield path
    finally:
        shutil.rmtree(path if path.exists() else staging, ignore_errors=True)
        owner.unlink(missing_ok=True)
        os.close(lock)


def file_inside(folder: Path, named: object) -> Path | None:
    """The regular file a child named, resolved, when it lies inside `folder` (the one folder
    the child could write); else None. The parent copies, reads and then deletes such files with
    its own rights, so a child an upload took over must not name the database or a secret, nor a
    link to one."""
    if not isinstance(named, str) or not named:
        return None
    path = Path(named)
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if path.is_symlink() or not resolved.is_file():
        return None
    return resolved if resolved.is_relative_to(Path(folder).resolve()) else None


def strays_in(folders: Sequence[Path]) -> list[Path]:
    """What is neither a plain file nor a folder (a link, a FIFO, a socket) in these folders,
    walked without following links: a sandboxed child writes them, and its parent reads them
    on the host, where a link's target is the host's (the database, a secret)."""
    found: list[Path] = []
    for folder in folders:
        for root, dirs, files in os.walk(folder, followlinks=False):
            for name in [*dirs, *files]:
                mode = os.lstat(Path(root) / name).st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    found.append(Path(root) / name)
    return found
