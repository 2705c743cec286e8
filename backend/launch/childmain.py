"""The child's side of the launcher (backend/launch/children.py): set the limits first, then
run what the parent asked for and write the outcome where the parent reads it."""

from __future__ import annotations

import json
import os
import pickle
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.errors import UserError
from backend.launch import limits as child_limits

# Installed (NNCF lists it) but used by no child: keras, under TensorFlow's converter, and
# transformers, under the GenAI model builder, import it and SciPy with it only for optional
# wrappers, about 1.5 s of CPU per such child. None in sys.modules makes both see it absent.
UNUSED_IN_CHILDREN = ("sklearn",)


def skip_unused_imports() -> None:
    """Mark the packages no child uses as absent, before anything imports them."""
    for name in UNUSED_IN_CHILDREN:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def _call(request: Path) -> Any:
    """Run the JSON request's module:function; import happens after the limits are set."""
    import importlib

    payload = json.loads(request.read_text())
    module, _, name = payload["target"].partition(":")
    return getattr(importlib.import_module(module), name)(*payload["args"])


def _report(mode: str, result: Path, body: Callable[[], Any]) -> int:
    """Run body, write {'kind': ..., ...} to result; the parent reads it after the child exits."""
    try:
        value = body()
        record: dict[str, Any] = {"kind": "ok", "value": value}
    except BaseException as exc:  # the parent records it; the child must never hang
        limit = child_limits.limit_hit_by_exception(exc)
        if limit:
            record = {"kind": "limit", "limit": limit}
        elif isinstance(exc, UserError):
            record = {"kind": "user_error", "text": str(exc)}
        else:
            record = {"kind": "error", "text": traceback.format_exc()}
        del exc
    data = pickle.dumps(record) if mode == "pickle" else json.dumps(record).encode()
    result.write_bytes(data)
    return 0


def main(argv: list[str]) -> int:
    """Child entry: set the limits first, then run what the parent asked for."""
    limits, mode, *rest = argv
    # a fork server's forks set the process count when each starts (fork_server)
    child_limits.apply(child_limits.ChildLimits.from_dict(json.loads(limits)), mode != "forks")
    skip_unused_imports()
    if mode == "module":
        import runpy

        sys.argv = list(rest)
        runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
        return 0
    if mode in ("dialog", "forks"):  # answers requests until stdin closes (launch/dialog.py)
        return serve_dialog(Path(rest[0]))
    request, result = Path(rest[0]), Path(rest[1])
    if mode == "call":
        os.chdir(result.parent)  # files a call leaves behind go to its scratch folder
    if mode == "pickle":

        def body() -> Any:
            func, args, kwargs = pickle.loads(request.read_bytes())
            return func(*args, **kwargs)

        return _report(mode, result, body)
    return _report(mode, result, lambda: _call(request))


def serve_dialog(request: Path) -> int:
    """A dialog child's loop: make the handler, then answer each line until stdin closes. The
    pipe to the parent is a copy of fd 1; fd 1 becomes stderr, so prints never reach the pipe."""
    import importlib

    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def reply(record: dict[str, Any]) -> None:
        answers.write(json.dumps(record).encode() + b"\n")
        answers.flush()

    def guarded(body: Callable[[], Any]) -> dict[str, Any]:
        try:
            return {"kind": "ok", "value": body()}
        except BaseException as exc:  # the parent reads it; the child must never hang
            limit = child_limits.limit_hit_by_exception(exc)
            if limit:
                return {"kind": "limit", "limit": limit}
            if isinstance(exc, UserError):
                return {"kind": "user_error", "text": str(exc)}
            return {"kind": "error", "text": traceback.format_exc()}

    payload = json.loads(request.read_text())
    module, _, name = payload["target"].partition(":")
    handler: list[Callable[[dict[str, Any]], Any]] = []
    opened = guarded(
        lambda: handler.append(getattr(importlib.import_module(module), name)(*payload["args"]))
    )
    for line in sys.stdin.buffer:
        if not handler:  # the handler failed to open: every request gets why
            reply(opened)
            continue
        message = json.loads(line)
        reply(guarded(lambda message=message: handler[0](message)))
    return 0


def fork_server(
    preload: list[str], extra_procs: int, sandboxed: bool
) -> Callable[[dict[str, Any]], Any]:
    """The handler of a fork server (backend/launch/forks.py): import `preload` once, then for
    each request fork a fresh process that runs it as a call child does and answer its exit
    code. The server only imports trusted code; what a request runs happens in its fork."""
    import gc
    import importlib

    child_limits.set_dumpable(False)  # a fork that took over its process cannot reach this one
    for name in preload:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()  # the imported objects stay shared with the forks, not copied as gc visits them

    def fork(message: dict[str, Any]) -> dict[str, Any]:
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _forked(Path(message["folder"]), sandboxed, extra_procs)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if sandboxed:
            _end_leftovers()
        return {"exitcode": os.waitstatus_to_exitcode(status)}

    return fork


def _end_leftovers() -> None:
    """SIGKILL what a fork left running in the sandbox's PID namespace (all but bubblewrap's
    init, pid 1, and this server), so nothing of one call waits for the next one's files."""
    import signal

    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (1, os.getpid()):
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _forked(folder: Path, sandboxed: bool, extra_procs: int) -> int:
    """In the fork: what a call child of its own would have (stdin empty, stdout and stderr in
    files, only those descriptors, its folder, in the sandbox its folder as HOME and TMPDIR, its
    limits), then the call."""
    import tempfile

    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        os.dup2(os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the server's pipe to the parent above all
    child_limits.set_dumpable(True)  # its own /proc again (the peak-memory reset writes there)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - flushed below, never closed
    if sandboxed:  # as bubblewrap sets them for a call child: its own folder
        os.environ.update(HOME=str(folder), TMPDIR=str(folder))
    tempfile.tempdir = None  # read TMPDIR again
    os.chdir(folder)
    child_limits.die_with_parent()
    child_limits.limit_processes(extra_procs)
    try:
        return _report("call", folder / "result.json", lambda: _call(folder / "request.json"))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
