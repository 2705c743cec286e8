"""Each child's temporary folder: made fresh, removed by the parent whatever happened to the child;
and a job's own temporary folder (the outputs its children leave), kept beside them.

A parent that was SIGKILLed cannot remove its folders; the next parent sweeps them (their names
carry the parent's pid).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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


def _sweep_orphans(root: Path) -> None:
    """Remove folders whose parent process is gone (it was SIGKILLed before its cleanup)."""
    for folder in root.glob(f"{FOLDER_PREFIX}*"):
        pid = folder.name.removeprefix(FOLDER_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def _decline_openvino_telemetry(home: Path) -> None:
    """OpenVINO's converter and NNCF report each use to Google Analytics unless a consent file
    under HOME says no, and a sandboxed child's HOME is its scratch folder. Optiboard sends
    nothing about its users' models; and with no network in the sandbox, each report only cost
    the child a process start (2% of a test run's CPU)."""
    consent = home / "intel" / "openvino_telemetry"  # where openvino_telemetry looks on Linux
    consent.parent.mkdir()
    consent.write_text("0")


@contextmanager
def child_folder() -> Iterator[ChildFolder]:
    """A fresh folder for one child, removed by the parent whatever happened to the child."""
    with owned_folder() as path:
        folder = ChildFolder(path)
        folder.scratch.mkdir()
        _decline_openvino_telemetry(folder.scratch)
        yield folder


@contextmanager
def owned_folder(label: str = "") -> Iterator[Path]:
    """A temporary folder of this process (a child's, a job's outputs, a node's), removed on exit
    and swept when this process was SIGKILLed before it could remove it: a variant model left in
    /tmp by a killed worker stayed there for good."""
    root = children_root()
    root.mkdir(parents=True, exist_ok=True)
    _sweep_orphans(root)
    prefix = f"{FOLDER_PREFIX}{os.getpid()}-" + (f"{label}-" if label else "")
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
