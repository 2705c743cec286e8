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
    child_limits.apply(child_limits.ChildLimits(**json.loads(limits)))
    skip_unused_imports()
    if mode == "module":
        import runpy

        sys.argv = list(rest)
        runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
        return 0
    if mode == "dialog":  # answers requests until stdin closes (backend/launch/dialog.py)
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
