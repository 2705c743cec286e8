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
    if mode == "module":
        import runpy

        sys.argv = list(rest)
        runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
        return 0
    if mode == "dialog":  # answers requests until stdin closes (backend/launch/dialog.py)
        from backend.launch.dialog import serve

        return serve(Path(rest[0]))
    request, result = Path(rest[0]), Path(rest[1])
    if mode == "call":
        os.chdir(result.parent)  # files a call leaves behind go to its scratch folder
    if mode == "pickle":

        def body() -> Any:
            func, args, kwargs = pickle.loads(request.read_bytes())
            return func(*args, **kwargs)

        return _report(mode, result, body)
    return _report(mode, result, lambda: _call(request))
