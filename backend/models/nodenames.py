"""The name of an ONNX node, or '<op>_<index>' (ONNX Runtime's scheme) where the file gives none.

`index` is the node's position in its own graph.node everywhere (an If/Loop/Scan body's nodes
are counted in their body). Nothing here imports onnx at run time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx


def node_name(node: onnx.NodeProto, index: int) -> str:
    """Same in Graph page, cost table, compat facts, profiles: users type it into "keep in FP32"."""
    return node.name or f"{node.op_type}_{index}"


def graph_names(graph: onnx.GraphProto, used: set[str]) -> list[str]:
    """One graph's node names, all of them before any body is visited: a node's position in its
    own graph.node, as every other namer counts, so the main graph's names are the Graph page's
    whatever If/Loop/Scan bodies hold; a body's name taken already gets its position appended."""
    names = []
    for position, node in enumerate(graph.node):
        name = node_name(node, position)
        while name in used:
            name = f"{name}_{position}"
        used.add(name)
        names.append(name)
    return names


def bodies(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    """(attribute name, graph) of each If/Loop/Scan body the node holds."""
    for attr in node.attribute:
        for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            yield attr.name, sub


MAIN = "main"  # the graph a top-level node sits in


def inside(where: str, holder: str, attr: str) -> str:
    """The graph `holder`'s body `attr` is, seen from the graph `where` holding it: "If_2's
    else_branch"; nested "Loop_0's body, If_1's then_branch". One spelling for the Graph page
    (BodyNode.where) and the compatibility table (NodeFacts.graph)."""
    step = f"{holder}'s {attr}"
    return step if where == MAIN else f"{where}, {step}"


@dataclass(frozen=True)
class BodyNode:
    """A node inside an If/Loop/Scan body, by the name compatibility facts give it."""

    name: str
    where: str  # "If_2's else_branch"; nested: "Loop_0's body, If_1's then_branch"
    holder: str  # the main-graph node holding that body: what Netron's main view can select


def body_nodes(graph: onnx.GraphProto) -> list[BodyNode]:
    """Every node inside the bodies of `graph`'s nodes, named as compat facts' read_nodes names
    them (main graph first, then each body depth first, sharing one set of used names)."""
    used: set[str] = set()
    found: list[BodyNode] = []

    def visit(sub: onnx.GraphProto, where: str, holder: str) -> None:
        for node, name in zip(sub.node, graph_names(sub, used), strict=True):
            found.append(BodyNode(name, where, holder))
            for attr, inner in bodies(node):
                visit(inner, inside(where, name, attr), holder)

    for node, name in zip(graph.node, graph_names(graph, used), strict=True):
        for attr, sub in bodies(node):
            visit(sub, inside(MAIN, name, attr), name)
    return found
