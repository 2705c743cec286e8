"""Resident memory of the test process (or a server it started), to show that hostile inputs
never grow it."""

from __future__ import annotations

from pathlib import Path

MB = 1 << 20


def rss_bytes(pid: int | str = "self") -> int:
    """Current VmRSS of this process, or of another one such as a server under test (not the
    peak, so earlier tests do not hide growth)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")
