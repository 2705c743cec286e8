"""A graph's structure (node names, op types, tensors), read without its weights.

Overlays and diffs need only who is who: the profile's name for each node ('<op>_<index>' for an
unnamed one, backend.models.nodenames.node_name), and the key Netron finds it by (its name, or the
first tensor it produces: backend.viewer.focus_keys). External data is never opened; a large
.onnx (weights embedded) is parsed in a limited child so its initializers never sit in the web
process.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from backend.models.graphread import load_graph, parse_graph
from backend.models.inspect import value_info
from backend.models.nodenames import BodyNode, body_nodes, node_name


@dataclass(frozen=True)
class GraphNode:
    """One node of the main graph."""

    key: str  # the name profiles, costs and the compatibility matrix give it
    op_type: str
    focus: str  # what the viewer finds it by: its name, or the first tensor it produces
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    domain: str = ""


@dataclass(frozen=True)
class Found:
    """What GraphStructure.find found: the name to show, and what Netron selects."""

    name: str  # the display name (node_name; a body's node as compat facts name it)
    focus: str  # Netron's node=: a node name or its first output tensor
    body: str = ""  # "If_2's else_branch" for a body's node
    holder: str = ""  # then the main-graph node holding that body, which Netron selects


@dataclass(frozen=True)
class GraphStructure:
    nodes: tuple[GraphNode, ...]
    bodies: tuple[BodyNode, ...] = ()  # nodes inside If/Loop/Scan bodies, as compat names them
    # this file's own inputs and outputs (name, dtype, shape): a fixed-batch variant's are not
    # the upload's
    inputs: tuple[dict[str, Any], ...] = ()
    outputs: tuple[dict[str, Any], ...] = ()

    def by_key(self) -> dict[str, GraphNode]:
        return {n.key: n for n in self.nodes}

    def find(self, name: str) -> Found | None:
        """The node a link or a user means by `name`: a display name (node_name, as costs,
        compatibility and profiles show it), a node's own name, or a tensor it produces (the
        Jobs page's links name an unnamed node by its first output); a body's node is found
        through the main-graph node holding that body. None where nothing matches."""
        for node in self.nodes:
            if name in (node.key, node.focus):
                return Found(node.key, node.focus)
        for node in self.nodes:
            if name in node.outputs:
                return Found(node.key, node.focus)
        body = next((b for b in self.bodies if b.name == name), None)
        if body is None:
            return None
        return Found(name, self.by_key()[body.holder].focus, body.where, body.holder)

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [asdict(n) for n in self.nodes],
            "bodies": [asdict(b) for b in self.bodies],
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GraphStructure:
        return cls(
            tuple(
                GraphNode(
                    n["key"],
                    n["op_type"],
                    n["focus"],
                    tuple(n["inputs"]),
                    tuple(n["outputs"]),
                    n.get("domain", ""),
                )
                for n in data["nodes"]
            ),
            tuple(BodyNode(**b) for b in data.get("bodies", ())),
            tuple(data.get("inputs", ())),
            tuple(data.get("outputs", ())),
        )


def structure_of(model: Any) -> GraphStructure:
    """The structure of an onnx.ModelProto's main graph, and the names of its bodies' nodes."""
    nodes = []
    for index, node in enumerate(model.graph.node):
        key = node_name(node, index)
        focus = node.name or (node.output[0] if node.output else key)
        nodes.append(
            GraphNode(key, node.op_type, focus, tuple(node.input), tuple(node.output), node.domain)
        )
    weights = {t.name for t in model.graph.initializer}
    return GraphStructure(
        tuple(nodes),
        tuple(body_nodes(model.graph)),
        tuple(value_info(v) for v in model.graph.input if v.name not in weights),
        tuple(value_info(v) for v in model.graph.output),
    )


def read_structure(path: Path) -> GraphStructure:
    """The structure of the .onnx at `path`; external data is never read, and a file past
    models.graphread's IN_PROCESS_BYTES (weights embedded) is parsed in a limited child. Kept
    per file (its size and time say it is the same), so a page's reruns do not parse it again."""
    path = Path(path).resolve()
    stat = path.stat()
    return _structure_of_file(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _structure_of_file(path: Path, _size: int, _mtime_ns: int) -> GraphStructure:
    what = f"Reading the graph of {path.name!r}"
    return parse_graph(path, child_structure, what, read=GraphStructure.from_dict)


def child_structure(path: str) -> dict[str, Any]:
    return structure_of(load_graph(path)).to_dict()
