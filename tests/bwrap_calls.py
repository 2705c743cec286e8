"""bubblewrap with a witness: a wrapper in front of the real binary writes each call's argv down
and execs it, so a test can see which children ran sandboxed and with which binds."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

REAL_BWRAP = "/usr/bin/bwrap"


def logging_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """OPTIBOARD_BWRAP set to the wrapper; the file each call's argv is appended to."""
    log = tmp_path / "bwrap-calls.txt"
    wrapper = tmp_path / "bwrap"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(log))}\nexec {REAL_BWRAP} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(wrapper))
    return log


def child_calls(log: Path) -> list[str]:
    """The children's calls (the availability trial left out)."""
    return [c for c in log.read_text().splitlines() if "backend.launch.children" in c]
