"""What /proc says of a process, read one way for every test that follows processes (the leak
check, the launch tests, the browser's renderers)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def stat_fields(pid: int | str) -> list[str]:
    """/proc/PID/stat's fields after the command name (state first, then the parent's pid); []
    when the process ended (or is another user's). The name may hold spaces and parentheses, so
    the fields start after its last ')'."""
    try:
        text = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except OSError:
        return []
    return text.rpartition(")")[2].split()


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    fields = stat_fields(pid)
    return bool(fields) and fields[0] != "Z"


def descendants(root: int) -> list[int]:
    """Every process below `root` now: children, their children, and so on."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = stat_fields(stat.parent.name)
        if len(fields) >= 2:
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def ended_pid() -> int:
    """The pid of a process that has ended (and been reaped): one no process holds now."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid
