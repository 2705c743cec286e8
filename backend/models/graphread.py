"""Reading an .onnx graph that an upload or a child made: here while it is small, past that in a
limited child, so no process that holds the database or the store parses a large upload's
protobuf (its embedded weights) itself. External data is never opened either way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

# Past this the protobuf holds weights worth keeping out of the dashboard's and the worker's
# processes: parse in a child.
IN_PROCESS_BYTES = 16 * 1024 * 1024


def parse_graph(path: Path, child: Callable[[str], Any], what: str) -> Any:
    """child(path) on an .onnx file: in this process up to IN_PROCESS_BYTES, past that (weights
    embedded) in a limited child that sees only the file and answers JSON. `child` returns
    what JSON can carry, so both ways give the caller the same value."""
    path = Path(path).resolve()
    if path.stat().st_size <= IN_PROCESS_BYTES:
        return child(str(path))
    from backend.launch.children import run_parse

    target = f"{child.__module__}:{child.__name__}"
    return run_parse(target, str(path), what=what, read_only=[path])


def node_names(path: Path) -> set[str]:
    """The main graph's node names as stored (an unnamed node's is '')."""
    path = Path(path)
    return set(parse_graph(path, child_node_names, f"Reading the node names of {path.name!r}"))


def child_node_names(path: str) -> list[str]:
    import onnx

    return [node.name for node in onnx.load(path, load_external_data=False).graph.node]
