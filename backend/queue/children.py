"""Run a function in a child process with a time limit, so a crash there cannot take us down."""

from __future__ import annotations

import multiprocessing as mp
import re
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_CONTEXT = mp.get_context("spawn")  # no inherited threads, sessions or DB connections


@dataclass
class ChildOutcome:
    ok: bool
    value: Any = None
    error: str | None = None  # traceback text or what happened to the child
    exitcode: int | None = None
    cancelled: bool = False
    timed_out: bool = False


def _child_main(conn: Any, func: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    try:
        value = func(*args, **kwargs)
        conn.send(("ok", value))
    except BaseException as exc:  # the parent records it; the child must never hang
        from backend.errors import UserError

        kind = "user_error" if isinstance(exc, UserError) else "error"
        text = str(exc) if kind == "user_error" else traceback.format_exc()
        conn.send((kind, text))
    finally:
        conn.close()


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the child did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (killed: often out of memory)" if -code == signal.SIGKILL else ""
        hint = " (the runtime crashed)" if -code in (signal.SIGSEGV, signal.SIGABRT) else hint
        return f"the child process died from {name}{hint}"
    return f"the child process exited with code {code} without a result"


def run_in_child(
    func: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    should_cancel: Callable[[], bool] | None = None,
    on_tick: Callable[[], None] | None = None,
    tick_s: float = 0.5,
    **kwargs: Any,
) -> ChildOutcome:
    """Call func(*args) in a spawned child; kill it on timeout or when should_cancel() says so."""
    parent_conn, child_conn = _CONTEXT.Pipe(duplex=False)
    process = _CONTEXT.Process(
        target=_child_main, args=(child_conn, func, args, kwargs), daemon=True
    )
    process.start()
    child_conn.close()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if parent_conn.poll(tick_s):
                try:
                    kind, payload = parent_conn.recv()
                except EOFError:
                    process.join(5)
                    return ChildOutcome(
                        False, error=_describe_exit(process.exitcode), exitcode=process.exitcode
                    )
                process.join(10)
                if kind == "ok":
                    return ChildOutcome(True, value=payload, exitcode=process.exitcode)
                return ChildOutcome(False, error=payload, exitcode=process.exitcode, value=kind)
            if not process.is_alive():
                process.join()
                return ChildOutcome(
                    False, error=_describe_exit(process.exitcode), exitcode=process.exitcode
                )
            if on_tick is not None:
                on_tick()
            if should_cancel is not None and should_cancel():
                return ChildOutcome(False, error="cancelled", cancelled=True)
            if time.monotonic() > deadline:
                return ChildOutcome(
                    False, error=f"time limit of {timeout_s:.0f} s exceeded", timed_out=True
                )
    finally:
        if process.is_alive():
            process.kill()
            process.join(5)
        parent_conn.close()


def run_module(module: str, *args: str, timeout_s: float, what: str) -> str:
    """`python -m module args` from the repo root; its stdout, or RuntimeError saying how it died.

    For children that talk JSON over stdout (registry dumps, matrix builds) and may segfault.
    """
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if proc.returncode != 0:
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stderr or "")  # ORT colours its log lines
        tail = [line for line in text.strip().splitlines() if line.strip()][-1:] or [""]
        raise RuntimeError(f"{what} crashed ({how}) {tail[0]}".strip())
    return proc.stdout
