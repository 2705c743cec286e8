"""The one launcher: every child process starts here, under limits, optionally sandboxed.

A crash, a memory bomb or hostile code in a child cannot take the worker or the dashboard down:
each child is `python -m backend.launch.children <limits> <mode> ...`, which sets its resource
limits (limits.py) before it imports anything else, runs with a fresh temporary folder that the
parent removes afterwards (also when the child was killed), and is killed with its whole process
group on timeout or cancel. Three ways in, one core (run_process):
- run_in_child: call a Python function (pickled by reference) and get its value back;
- run_call: call "module:function" with JSON arguments and get JSON back (safe for sandboxes),
  run_parse the same for a child that parses an untrusted file;
- run_module: `python -m module args` and get its stdout.
Children that run beside their parent until stopped (a Triton server, a Ray driver) start through
services.py, with the same process group and death-with-parent rules.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import settings
from backend.errors import UserError
from backend.launch import limits as child_limits
from backend.launch import pids, sandbox
from backend.launch.folders import ChildFolder, child_folder, strays_in
from backend.launch.outcomes import (
    ChildOutcome,
    ProcessOutcome,
    child_outcome,
    last_line,
    process_outcome,
    read_result,
)


def child_environment(sandboxed: bool, confined_to: Path | None = None) -> dict[str, str] | None:
    """None in the sandbox (bwrap --clearenv sets it); a confined child's is the sandbox's, with
    its scratch folder `confined_to` as HOME; a plain child's is this process's."""
    if sandboxed:
        return None
    if confined_to is not None:
        return sandbox.environment(confined_to)
    env = {**os.environ, **child_limits.CHILD_ENVIRONMENT}
    root = str(settings.PROJECT_ROOT)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _wait(
    process: subprocess.Popen,
    timeout_s: float,
    should_cancel: Callable[[], bool] | None,
    on_tick: Callable[[], None] | None,
    tick_s: float,
) -> tuple[bool, bool]:
    """(timed_out, cancelled) once the child exits or one of the two happens."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:  # a tick, or less where the deadline comes first
            process.wait(timeout=max(0.0, min(tick_s, deadline - time.monotonic())))
            return False, False
        except subprocess.TimeoutExpired:
            pass
        if on_tick is not None:
            on_tick()
        if should_cancel is not None and should_cancel():
            return False, True
        if time.monotonic() > deadline:
            return True, False


def run_process(
    entry: Sequence[str],
    folder: ChildFolder,
    *,
    timeout_s: float,
    sandboxed: bool = False,
    read_only: Sequence[Path] = (),
    merge_output: bool = False,
    should_cancel: Callable[[], bool] | None = None,
    on_tick: Callable[[], None] | None = None,
    tick_s: float = 0.5,
    limits: child_limits.ChildLimits | None = None,
    binds: sandbox.Binds | None = None,
    python: str | None = None,
    confine: bool = False,
) -> ProcessOutcome:
    """Run `python -m backend.launch.children <limits> *entry` and wait for it (the one core).

    Sandboxed, the child runs under bubblewrap (sandbox.py) and raises UserError when no working
    sandbox exists: never a silent fallback. python: another interpreter than this one (a runtime
    environment's, backend/runtimeenvs.py), whose folder the binds must name. confine, for a
    child that reads an untrusted file where it runs without the sandbox: the sandbox's
    environment, in its scratch folder, and where the kernel has Landlock only the files the
    sandbox would show it (landlock.py).
    """
    limits = limits or child_limits.ChildLimits.from_settings()
    confined_to = folder.scratch if confine and not sandboxed else None
    if confined_to is not None:
        seen = sandbox.Binds.of(read_only=[*read_only, *(binds.read_only if binds else ())])
        seen = dataclasses.replace(seen, writable=binds.writable if binds else ())
        limits = dataclasses.replace(limits, confine=sandbox.confinement(folder.scratch, seen))
    argv = child_argv(entry, folder, limits, sandboxed, read_only, binds, python)
    resident = limits.memory_bytes if limits.gpu else None  # GPU children: a memory cgroup
    with pids.group(limits.extra_procs, resident) as tasks:
        argv = tasks.wrap(argv) if tasks else argv
        process = _start(argv, folder, sandboxed, merge_output, confined_to)
        try:
            timed_out, cancelled = _wait(process, timeout_s, should_cancel, on_tick, tick_s)
        finally:
            if process.poll() is None:
                _kill_group(process)
        procs_hit = tasks is not None and tasks.limit_hit()
        memory_hit = tasks is not None and tasks.out_of_memory()
    # a sandboxed child's output folders are read here, where a link's target is the host's
    strays = strays_in(binds.writable) if sandboxed and binds is not None else []
    unlimited = limits.gpu and (tasks is None or tasks.memory is None)
    notes = [child_limits.unlimited_memory_note("This GPU child")] if unlimited else []
    return process_outcome(
        process.returncode,
        folder.root,
        limits,
        timed_out=timed_out,
        cancelled=cancelled,
        procs_hit=procs_hit,
        memory_hit=memory_hit,
        merge_output=merge_output,
        notes=notes,
        strays=bool(strays),
    )


def child_argv(
    entry: Sequence[str],
    folder: ChildFolder,
    limits: child_limits.ChildLimits,
    sandboxed: bool,
    read_only: Sequence[Path] = (),
    binds: sandbox.Binds | None = None,
    python: str | None = None,
) -> list[str]:
    """The command line of one child: the interpreter, the limits, the entry, in bubblewrap when
    sandboxed (UserError with the reason when no sandbox works here)."""
    argv = [python or sys.executable, "-m", "backend.launch.children"]
    argv += [json.dumps(limits.to_dict()), *entry]
    if sandboxed:
        state = sandbox.available()
        if not state.ok:
            raise UserError(f"This needs a sandbox, but {state.reason}.")
        argv = sandbox.command(argv, folder.scratch, read_only, state.binary, binds)
    return argv


def _start(
    argv: list[str],
    folder: ChildFolder,
    sandboxed: bool,
    merge_output: bool,
    confined_to: Path | None = None,
) -> subprocess.Popen:
    """Start the child with its output in files beside its scratch folder."""
    out_path, err_path = folder.root / "stdout", folder.root / "stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out if merge_output else err,
            cwd=folder.scratch if sandboxed or confined_to else None,
            env=child_environment(sandboxed, confined_to),
            start_new_session=True,  # one process group, killed as a whole
        )


def run_in_child(
    func: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    should_cancel: Callable[[], bool] | None = None,
    on_tick: Callable[[], None] | None = None,
    tick_s: float = 0.5,
    what: str = "The child process",
    limits: child_limits.ChildLimits | None = None,
    **kwargs: Any,
) -> ChildOutcome:
    """Call func(*args, **kwargs) in a limited child; kill it on timeout or should_cancel().
    limits: the settings' by default; ChildLimits.from_settings(gpu=True) for a GPU child."""
    with child_folder() as folder:
        request, result = folder.scratch / "request.pkl", folder.scratch / "result.pkl"
        request.write_bytes(pickle.dumps((func, args, kwargs)))
        done = run_process(
            ["pickle", str(request), str(result)],
            folder,
            timeout_s=timeout_s,
            should_cancel=should_cancel,
            on_tick=on_tick,
            tick_s=tick_s,
            limits=limits,
        )
        return child_outcome(done, read_result(result, as_pickle=True), what, timeout_s)


def call_in_child(
    target: str,
    *args: Any,
    timeout_s: float,
    what: str,
    should_cancel: Callable[[], bool] | None = None,
    sandboxed: bool = False,
    binds: sandbox.Binds | None = None,
    outputs: Mapping[str, Path] | None = None,
    limits: child_limits.ChildLimits | None = None,
    python: str | None = None,
    confine: bool = False,
) -> ChildOutcome:
    """JSON in, JSON out (never unpickled: a child an untrusted model took over returns data
    only): `module:function(*args)` in a limited (optionally sandboxed) child, in its scratch
    folder; files it leaves there under the names in `outputs` are moved to the given paths.
    python: a runtime environment's interpreter (backend/runtimeenvs.py) instead of this one.
    confine: run_process's, for a child that reads an untrusted file."""
    with child_folder() as folder:
        request, result = folder.scratch / "request.json", folder.scratch / "result.json"
        request.write_text(json.dumps({"target": target, "args": list(args)}))
        done = run_process(
            ["call", str(request), str(result)],
            folder,
            timeout_s=timeout_s,
            sandboxed=sandboxed,
            should_cancel=should_cancel,
            binds=binds,
            limits=limits,
            python=python,
            confine=confine,
        )
        outcome = child_outcome(done, read_result(result, as_pickle=False), what, timeout_s)
        if outcome.ok:
            for name, destination in (outputs or {}).items():
                produced = folder.scratch / name
                if produced.is_file() and not produced.is_symlink():
                    shutil.move(produced, destination)
        return outcome


def run_call(
    target: str,
    *args: Any,
    timeout_s: float,
    what: str,
    sandboxed: bool = False,
    read_only: Sequence[Path] = (),
    outputs: Mapping[str, Path] | None = None,
    confine: bool = False,
) -> Any:
    """call_in_child's value; UserError for the user's problems and limits, else RuntimeError."""
    binds = sandbox.Binds(read_only=tuple(map(Path, read_only)))
    kwargs = {"timeout_s": timeout_s, "what": what, "sandboxed": sandboxed, "outputs": outputs}
    outcome = call_in_child(target, *args, binds=binds, confine=confine, **kwargs)
    if outcome.ok:
        return outcome.value
    if outcome.timed_out:
        raise UserError(
            f"{what} took longer than {timeout_s:g} s and was stopped; try a smaller file."
        )
    if outcome.value in ("user_error", "limit"):
        raise UserError(outcome.error or what)
    if outcome.value == "error":
        raise RuntimeError(f"{what} failed:\n{outcome.error}")
    raise UserError(f"{what} crashed ({outcome.error}); the file is damaged or not supported.")


def run_parse(
    target: str,
    *args: Any,
    what: str,
    read_only: Sequence[Path],
    outputs: Mapping[str, Path] | None = None,
) -> Any:
    """run_call for a child that parses an untrusted file (an upload, a stored model): under
    OPTIBOARD_PARSE_TIMEOUT_S, sandboxed wherever bubblewrap works here, else confined, seeing
    `read_only`."""
    timeout_s, sandboxed = settings.PARSE_TIMEOUT_S.get(), sandbox.available().ok
    kwargs = {"timeout_s": timeout_s, "sandboxed": sandboxed, "outputs": outputs, "confine": True}
    return run_call(target, *args, what=what, read_only=read_only, **kwargs)


def run_module(module: str, *args: str, timeout_s: float, what: str) -> str:
    """`python -m module args` in a limited child; its stdout, or RuntimeError saying how it died.

    For children that talk JSON over stdout (registry dumps, matrix builds) and may segfault.
    """
    with child_folder() as folder:
        done = run_process(["module", module, *args], folder, timeout_s=timeout_s)
    if done.timed_out:
        raise RuntimeError(f"{what} took longer than {timeout_s:g} s and was stopped")
    if done.limit:
        limits = child_limits.ChildLimits.from_settings()
        raise RuntimeError(child_limits.sentence(done.limit, what[:1].upper() + what[1:], limits))
    if done.returncode != 0:
        code = done.returncode or 0
        how = f"signal {-code}" if code < 0 else f"exit {code}"
        raise RuntimeError(f"{what} crashed ({how}) {last_line(done.stderr)}".strip())
    return done.stdout


# ---- child side -------------------------------------------------------------------------------


if __name__ == "__main__":
    from backend.launch.childmain import main

    raise SystemExit(main(sys.argv[1:]))
