"""The shape every converter child shares (tf2onnx, torch.onnx's exporter, onnxruntime-genai's
model builder): the parent runs `python -m MODULE --result FILE ...` under bubblewrap only, keeps
its merged output as the conversion log and reads back a JSON answer; the child parses its
arguments, converts step by step and writes that answer, naming the step that failed.

A call child (children.run_call) would lose the log and the partial answer (versions, the
signatures found) that the parent's one sentence quotes, so converters run as modules instead.
"""

from __future__ import annotations

import argparse
import json
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.errors import UserError
from backend.launch import sandbox
from backend.launch.children import run_process
from backend.launch.folders import ChildFolder
from backend.launch.limits import ChildLimits, sentence
from backend.launch.outcomes import ProcessOutcome, read_result

# ---- parent side ------------------------------------------------------------------------------


def require_sandbox(refused: str, why: str) -> None:
    """UserError unless bubblewrap works here: a converter never runs unsandboxed."""
    state = sandbox.available()
    if not state.ok:
        raise UserError(f"{refused} are refused here because {state.reason} ({why}).")


def run_converter(
    module: str, args: list[str], folder: ChildFolder, timeout_s: float, binds: sandbox.Binds
) -> tuple[ProcessOutcome, dict[str, Any]]:
    """Run the converter child in `folder`, sandboxed; its outcome (stdout: the whole log) and
    its JSON answer as a dict ({} when it left none, or nothing sensible)."""
    result_file = folder.scratch / "result.json"
    entry = ["module", module, "--result", str(result_file), *args]
    done = run_process(
        entry, folder, timeout_s=timeout_s, sandboxed=True, merge_output=True, binds=binds
    )
    answer = read_result(result_file)
    return done, answer if isinstance(answer, dict) else {}


def stopped(done: ProcessOutcome, what: str, timeout_s: float) -> str | None:
    """The sentence for a converter that the time limit or a resource limit stopped; None when
    it ran to its end. `what` names it: "The TensorFlow conversion"."""
    if done.timed_out:
        return (
            f"{what} took longer than {timeout_s:g} s and was stopped; upload a smaller model or "
            "raise OPTIBOARD_CONVERT_TIMEOUT_S."
        )
    if done.limit:
        return sentence(done.limit, what, ChildLimits.from_settings())
    return None


# ---- child side -------------------------------------------------------------------------------


def child_main(
    prog: str,
    options: Callable[[argparse.ArgumentParser], None],
    convert: Callable[[argparse.Namespace], dict[str, Any]],
    argv: list[str] | None = None,
) -> int:
    """A converter child's entry: its options beside --result, then convert's answer written
    there as JSON; exit 2 when the answer names an error."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--result", required=True)
    options(parser)
    args = parser.parse_args(argv)
    answer = convert(args)
    Path(args.result).write_text(json.dumps(answer))
    return 0 if "error" not in answer else 2


def attempt(
    step: str,
    body: Callable[[], Any],
    output: str | None = None,
    detail: Callable[[BaseException], str] = lambda exc: f"{type(exc).__name__}: {exc}",
) -> tuple[Any, dict[str, str] | None]:
    """(body's value, None), or (None, {"error": step, "detail": ...}) when it raised: the
    traceback goes to the log and a partial `output` file is removed. MemoryError is raised on,
    so the parent names the memory limit."""
    try:
        return body(), None
    except MemoryError:
        raise
    except Exception as exc:  # reported to the parent as a user-facing error, with the log
        traceback.print_exc()
        if output is not None:
            Path(output).unlink(missing_ok=True)
        return None, {"error": step, "detail": detail(exc)}


def versions(*modules: str) -> dict[str, str]:
    """Versions as the imported modules report them (what really ran); "missing" if absent."""
    import importlib

    found = {}
    for name in modules:
        try:
            found[name] = str(importlib.import_module(name).__version__)
        except (ImportError, AttributeError):  # absent, or a build without __version__
            found[name] = "missing"
    return found
