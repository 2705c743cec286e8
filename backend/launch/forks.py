"""Fresh children forked from a warm one: the launcher's door for many calls of one kind.

A sweep measures each configuration in a fresh child (its own limits, peak memory, crash and
thread pools), and each such child spent about 0.3 CPU-s starting Python and importing numpy,
onnx and the engine before it measured anything. A fork server is a dialog child (dialog.py,
started the same way: the same command line, sandbox, limits and cgroup) that imports those
modules once and then forks a fresh process per call (its side: childmain.fork_server). The
fork runs the call as a call child would (children.call_in_child): its own folder inside the
server's scratch folder (its HOME and TMPDIR when sandboxed), its stdout and stderr in files,
no descriptor of the server's, its own CPU-time count and process limit, death with the
server; the parent reads its result file and exit code and words them with the same
outcomes.child_outcome.

The server imports nothing that starts a thread (ONNX Runtime does, so the forks import it), and
never the uploaded model: whatever a call runs, runs in its fork. It is not dumpable (a fork that
took over its process can neither trace it nor open its descriptors), and in the sandbox it ends
whatever a fork left running before it answers, so one call cannot wait for the next one's
files. A call that times out or is cancelled ends the whole server (its process group and
cgroup); the next call starts a new one.
GPU children do not come here: each keeps its own memory cgroup (pids.py) and its own process.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from backend.launch import limits as child_limits
from backend.launch import sandbox
from backend.launch.children import call_in_child
from backend.launch.dialog import Dialog, DialogFailed, dialog
from backend.launch.folders import strays_in
from backend.launch.outcomes import ChildOutcome, child_outcome, process_outcome, read_result

ServerKey = tuple[str | None, bool, sandbox.Binds | None, child_limits.ChildLimits]


class Forks:
    """One warm fork server at a time, for calls that share its interpreter, sandbox binds and
    limits; use as a context manager (the server ends on the way out)."""

    def __init__(self, preload: Sequence[str]) -> None:
        self.preload = list(preload)
        self._stack: ExitStack | None = None
        self._server: Dialog | None = None
        self._key: ServerKey | None = None
        self._calls = itertools.count()
        self.started = 0  # servers started (a new one after a timeout, a cancel or new binds)

    @property
    def server(self) -> Dialog | None:
        """The running server, if one runs."""
        return self._server

    def __enter__(self) -> Forks:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the server, if one runs."""
        stack, self._stack, self._server, self._key = self._stack, None, None, None
        if stack is not None:
            stack.close()

    def call(
        self,
        target: str,
        *args: Any,
        timeout_s: float,
        what: str,
        should_cancel: Callable[[], bool] | None = None,
        sandboxed: bool = False,
        binds: sandbox.Binds | None = None,
        limits: child_limits.ChildLimits | None = None,
        python: str | None = None,
    ) -> ChildOutcome:
        """call_in_child's outcome for `module:function(*args)`, run in a fork of the server."""
        limits = limits or child_limits.ChildLimits.from_settings()
        if limits.gpu:
            return call_in_child(
                target,
                *args,
                timeout_s=timeout_s,
                what=what,
                should_cancel=should_cancel,
                sandboxed=sandboxed,
                binds=binds,
                limits=limits,
                python=python,
            )
        server = self._server_for((python, sandboxed, binds, limits))
        server.should_cancel = should_cancel
        folder = server.folder.scratch / f"call-{next(self._calls)}"
        folder.mkdir()
        failed: DialogFailed | None = None
        try:
            (folder / "request.json").write_text(json.dumps({"target": target, "args": args}))
            refused, code = _refused(server), None
            try:
                code = server.ask({"folder": str(folder)}, timeout_s)["exitcode"]
            except DialogFailed as failure:
                failed = failure
            except BaseException:  # the answer did not read (or an interrupt): end the server
                server.kill()
                self.close()
                raise
            timed_out = failed is not None and failed.timed_out
            cancelled = failed is not None and failed.cancelled
            procs_hit = _refused(server) > refused
            strays = bool(strays_in(binds.writable)) if sandboxed and binds is not None else False
            ended = {"timed_out": timed_out, "cancelled": cancelled, "procs_hit": procs_hit}
            done = process_outcome(code, folder, limits, strays=strays, **ended)
            outcome = child_outcome(done, read_result(folder / "result.json"), what, timeout_s)
            if failed is not None and not (timed_out or cancelled):  # the server itself died
                outcome.error = str(failed)
            return outcome
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            if failed is not None:  # past its time, cancelled or dead: the server goes with it
                server.kill()
                self.close()

    def _server_for(self, key: ServerKey) -> Dialog:
        """The running server for these settings, or a new one (ending one for other settings)."""
        if self._server is not None and self._key == key:
            return self._server
        self.close()
        python, sandboxed, binds, limits = key
        stack = ExitStack()
        self._server = stack.enter_context(
            dialog(
                "backend.launch.childmain:fork_server",
                self.preload,
                limits.extra_procs,
                sandboxed,
                what="The fork server",
                python=python,
                sandboxed=sandboxed,
                binds=binds,
                limits=limits,
                mode="forks",
            )
        )
        self._stack, self._key = stack, key
        self.started += 1
        return self._server


def _refused(server: Dialog) -> int:
    """Forks and thread starts the server's cgroup has refused so far (0 without a cgroup)."""
    return server.tasks.refusals() if server.tasks is not None else 0
