"""What a finished child left, in the parent's words: how it ended (ProcessOutcome), and the
value, the user's sentence or the reason that became of it (ChildOutcome).

Shared by the launcher's doors (children.py runs a child and waits; forks.py asks a warm fork
server for a fresh fork per call), so a child ends in the same words whichever door it took.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.errors import UserError
from backend.launch import limits as child_limits

RESULT_CAP = 256 << 20  # bytes of result or stdout the parent reads back
LOG_TAIL = 4 << 20  # bytes of merged output kept for logs and error lines


@dataclass
class ChildOutcome:
    ok: bool
    value: Any = None
    error: str | None = None  # traceback text, a limit's sentence, or what happened to the child
    exitcode: int | None = None
    cancelled: bool = False
    timed_out: bool = False
    limit: str | None = None  # 'memory', 'cpu', 'file', 'procs' or 'killed': a limit ended it
    notes: list[str] = field(default_factory=list)  # e.g. a GPU child's unlimited host memory

    def value_or_raise(self, what: str) -> Any:
        """The child's return value; its UserError again as one (the user's sentence), any other
        failure as a RuntimeError naming `what`."""
        if self.ok:
            return self.value
        if self.value == "user_error":
            raise UserError(self.error or f"{what} failed.")
        raise RuntimeError(f"{what} failed: {self.error}")


@dataclass
class ProcessOutcome:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    cancelled: bool = False
    limit: str | None = None
    limits: child_limits.ChildLimits | None = None  # what the child ran under
    notes: list[str] = field(default_factory=list)


def read_log(path: Path, cap: int, tail: bool = False) -> str:
    """The file's text, its first `cap` bytes (the tail's with tail=True); '' when absent."""
    if not path.is_file():
        return ""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(size - cap, 0) if tail else 0)
        return handle.read(cap).decode("utf-8", errors="replace")


def process_outcome(
    code: int | None,
    logs: Path,
    limits: child_limits.ChildLimits,
    *,
    timed_out: bool = False,
    cancelled: bool = False,
    procs_hit: bool = False,
    memory_hit: bool = False,
    merge_output: bool = False,
    notes: list[str] | None = None,
    strays: bool = False,
) -> ProcessOutcome:
    """How a child ended: its exit code, its stdout and stderr files in `logs` and the limit a
    cgroup saw it hit (procs_hit, memory_hit) or its exit says it hit."""
    stdout = read_log(logs / "stdout", LOG_TAIL if merge_output else RESULT_CAP, tail=merge_output)
    stderr = read_log(logs / "stderr", LOG_TAIL, tail=True)
    limit = "links" if strays else "procs" if procs_hit else "memory" if memory_hit else None
    if not (timed_out or cancelled or limit) and code != 0 and code is not None:
        limit = child_limits.limit_hit_by_exit(code, stderr if not merge_output else stdout)
    return ProcessOutcome(code, stdout, stderr, timed_out, cancelled, limit, limits, notes or [])


def describe_exit(code: int | None) -> str:
    if code is None:
        return "the child did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the runtime crashed)" if -code in (signal.SIGSEGV, signal.SIGABRT) else ""
        return f"the child process died from {name}{hint}"
    return f"the child process exited with code {code} without a result"


def last_line(text: str) -> str:
    """The last non-empty line of a child's log (the sentence that says what went wrong)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # ORT colours its log lines
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def read_result(path: Path, as_pickle: bool = False) -> dict[str, Any] | None:
    """The result a child left (JSON, or pickle from the project's own children), or None when it
    left none, too large a one, a link (its target is the host's) or nothing readable."""
    if path.is_symlink() or not path.is_file() or path.stat().st_size > RESULT_CAP:
        return None
    data = path.read_bytes()
    try:
        return pickle.loads(data) if as_pickle else json.loads(data)
    except (pickle.UnpicklingError, EOFError, ValueError):
        return None


def child_outcome(
    done: ProcessOutcome, result: dict[str, Any] | None, what: str, timeout_s: float
) -> ChildOutcome:
    """One ChildOutcome from how the process ended and what it left in its result file."""
    limits = done.limits or child_limits.ChildLimits.from_settings()
    if done.cancelled:
        return ChildOutcome(False, error="cancelled", cancelled=True)
    if done.timed_out:
        return ChildOutcome(
            False, error=f"time limit of {timeout_s:.0f} s exceeded", timed_out=True
        )
    kind = result.get("kind") if result else None
    if done.limit == "links":  # whatever it answered: its output folder is not to be read
        text = child_limits.sentence("links", what, limits)
        return ChildOutcome(False, "limit", text, done.returncode, limit="links", notes=done.notes)
    if kind == "ok":
        value = result["value"]  # type: ignore[index]
        return ChildOutcome(True, value=value, exitcode=done.returncode, notes=done.notes)
    # a refused fork or an OOM kill seen by the cgroup wins over what the child made of it
    limit = done.limit if done.limit in ("procs", "memory") else None
    limit = limit or (result.get("limit") if result else done.limit)
    if limit:
        text = child_limits.sentence(limit, what, limits)
        return ChildOutcome(False, "limit", text, done.returncode, limit=limit, notes=done.notes)
    if kind in ("user_error", "error"):
        text = result["text"]  # type: ignore[index]
        return ChildOutcome(False, kind, text, done.returncode, notes=done.notes)
    error = describe_exit(done.returncode)
    last = last_line(done.stderr)
    error = f"{error}: {last}" if last else error
    return ChildOutcome(False, error=error, exitcode=done.returncode, notes=done.notes)
