"""The test process's own resident memory, to show that hostile inputs never grow it."""

from __future__ import annotations

from pathlib import Path

MB = 1 << 20


def rss_bytes() -> int:
    """Current VmRSS of this process (not the peak, so earlier tests do not hide growth)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")
