"""A child that holds its state and answers requests one at a time: the launcher's third door.

run_process (children.py) waits for a child to finish, a service (services.py) runs beside its
parent; a dialog child starts the same way (the same command line, limits, sandbox and process
group, children.child_argv) and then answers JSON requests over its stdin and stdout until it is
closed (its side: backend/launch/childmain.py serve_dialog). Two of them side by side let a
parent time two runtime versions window by window, each with its session kept open between
windows (backend/jobs/regression.py). The child's own stdout is moved to its stderr before the
handler is imported, so a library's prints never reach the pipe.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from backend.errors import UserError
from backend.launch import limits as child_limits
from backend.launch import pids, sandbox
from backend.launch.children import child_argv, child_environment
from backend.launch.folders import ChildFolder, child_folder
from backend.launch.outcomes import last_line

LINE_CAP = 64 << 20  # bytes of one answer the parent reads


class DialogFailed(RuntimeError):
    """The child died, ran past its time or hit a limit; the message says which."""

    def __init__(self, message: str, *, timed_out: bool = False, cancelled: bool = False) -> None:
        super().__init__(message)
        self.timed_out, self.cancelled = timed_out, cancelled


class Dialog:
    """The parent's end: ask() sends one request and waits for its answer."""

    def __init__(
        self,
        process: subprocess.Popen,
        folder: ChildFolder,
        what: str,
        limits: child_limits.ChildLimits,
        should_cancel: Callable[[], bool] | None,
        tasks: pids.PidsGroup | None = None,
    ) -> None:
        self.process, self.folder, self.what = process, folder, what
        self.limits, self.should_cancel, self.tasks = limits, should_cancel, tasks
        self._buffer = b""

    def kill(self) -> None:
        """End the child and its process group now (a request that ran past its time)."""
        _kill(self.process)

    def ask(self, request: dict[str, Any], timeout_s: float) -> Any:
        """The handler's answer to one request; UserError for the user's problems (its own
        sentence), DialogFailed when the child died, timed out or was cancelled."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            raise DialogFailed(self._death()) from None
        answer = json.loads(self._read_line(timeout_s))
        if answer["kind"] == "ok":
            return answer["value"]
        if answer["kind"] == "user_error":
            raise UserError(answer["text"])
        if answer["kind"] == "limit":
            raise DialogFailed(child_limits.sentence(answer["limit"], self.what, self.limits))
        raise DialogFailed(f"{self.what} failed: {last_line(answer['text'])}")

    def _read_line(self, timeout_s: float) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            if time.monotonic() > deadline:
                message = f"{self.what} took longer than {timeout_s:.0f} s"
                raise DialogFailed(message, timed_out=True)
            if self.should_cancel is not None and self.should_cancel():
                raise DialogFailed("cancelled", cancelled=True)
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise DialogFailed(self._death())
            self._buffer += chunk
            if len(self._buffer) > LINE_CAP:
                raise DialogFailed(f"{self.what} answered more than {LINE_CAP >> 20} MiB")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _death(self) -> str:
        """What happened to a child that closed its end: its exit and its last log line."""
        code = self.process.wait()
        stderr = (self.folder.root / "stderr").read_bytes()[-(1 << 16) :]
        limit = child_limits.limit_hit_by_exit(code, stderr.decode("utf-8", "replace"))
        if limit:
            return child_limits.sentence(limit, self.what, self.limits)
        last = last_line(stderr.decode("utf-8", "replace"))
        return f"{self.what} exited with code {code}" + (f": {last}" if last else "")


@contextmanager
def dialog(
    target: str,
    *args: Any,
    what: str,
    python: str | None = None,
    sandboxed: bool = False,
    binds: sandbox.Binds | None = None,
    limits: child_limits.ChildLimits | None = None,
    should_cancel: Callable[[], bool] | None = None,
    read_only: Sequence[Path] = (),
    mode: str = "dialog",
) -> Iterator[Dialog]:
    """Start `module:function(*args)` (it returns the handler, a callable of one request) in a
    limited child under `python`; the child and its process group are killed on the way out.
    mode "forks": the handler forks a process per request, which sets the process limit itself
    (backend/launch/forks.py)."""
    limits = limits or child_limits.ChildLimits.from_settings()
    with ExitStack() as stack:
        folder = stack.enter_context(child_folder())
        request = folder.scratch / "dialog.json"
        request.write_text(json.dumps({"target": target, "args": list(args)}))
        entry = [mode, str(request)]
        argv = child_argv(entry, folder, limits, sandboxed, read_only, binds, python)
        resident = limits.memory_bytes if limits.gpu else None
        tasks = stack.enter_context(pids.group(limits.extra_procs, resident))
        with open(folder.root / "stderr", "wb") as err:
            process = subprocess.Popen(
                tasks.wrap(argv) if tasks else argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=folder.scratch if sandboxed else None,
                env=child_environment(sandboxed),
                start_new_session=True,
            )
        try:
            yield Dialog(process, folder, what, limits, should_cancel, tasks)
        finally:
            _close(process)


def _close(process: subprocess.Popen) -> None:
    """Tell the child to stop (EOF), then kill its group whatever it does."""
    for stream in (process.stdin, process.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    try:
        process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass
    _kill(process, leftovers=True)


def _kill(process: subprocess.Popen, leftovers: bool = False) -> None:
    """SIGKILL the child's process group; leftovers: also once the child itself has exited
    (what it left in its group), else not once it is reaped (its pid may be another's)."""
    if process.returncode is not None and not leftovers:
        return
    try:
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass
    process.wait()
