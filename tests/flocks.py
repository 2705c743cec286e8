"""Seeing, from outside, that a process is blocked on an flock (for lock-order tests)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def someone_waits_on(lock_file: Path) -> bool:
    """True while the kernel lists a blocked flock on that file (/proc/locks marks waiters '->')."""
    if not lock_file.exists():
        return False
    inode = os.stat(lock_file).st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and int(fields[-3].rsplit(":", 1)[-1]) == inode:
            return True
    return False


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never happened")
        time.sleep(0.01)
