"""Reading an .onnx graph that an upload or a child made: here while it is small, past that in a
limited child, so no process that holds the database or the store parses a large upload's
protobuf (its embedded weights) itself. External data is never opened either way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from backend.errors import UserError

T = TypeVar("T")

# Past this the protobuf holds weights worth keeping out of the dashboard's and the worker's
# processes: parse in a child.
IN_PROCESS_BYTES = 16 * 1024 * 1024


def parse_graph(
    path: Path, child: Callable[[str], Any], what: str, read: Callable[[Any], T] | None = None
) -> T:
    """read(child(path)) on an .onnx file: child in this process up to IN_PROCESS_BYTES, past
    that (weights embedded) in a limited child that sees only the file and answers JSON, whose
    answer a child the upload took over may have shaped. `read` types the answer; one that
    does not read is a UserError, never an exception deep in the caller."""
    path = Path(path).resolve()
    if path.stat().st_size <= IN_PROCESS_BYTES:
        answer = child(str(path))
    else:
        from backend.launch.children import run_parse

        target = f"{child.__module__}:{child.__name__}"
        answer = run_parse(target, str(path), what=what, read_only=[path])
    if read is None:
        return answer
    try:
        return read(answer)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{what} gave an answer that does not read ({exc}).") from None


def node_names(path: Path) -> set[str]:
    """The main graph's node names as stored (an unnamed node's is '')."""
    path = Path(path)
    what = f"Reading the node names of {path.name!r}"
    return parse_graph(path, child_node_names, what, read=strings)


def strings(answer: Any) -> set[str]:
    """A child's list of names, each a string."""
    if not isinstance(answer, list) or not all(isinstance(n, str) for n in answer):
        raise TypeError("not a list of names")
    return set(answer)


def load_graph(path: str) -> Any:
    """The onnx.ModelProto at `path`, external data unopened; a file that is no ONNX graph is a
    UserError naming it (in a child too, where it comes back as that sentence), not protobuf's
    DecodeError here or a RuntimeError carrying the child's traceback."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        return onnx.load(path, load_external_data=False)
    except (DecodeError, ValueError) as exc:
        raise UserError(f"{Path(path).name} does not read as an ONNX graph ({exc}).") from None


def child_node_names(path: str) -> list[str]:
    return [node.name for node in load_graph(path).graph.node]
