"""The name of an ONNX node, or '<op>_<index>' (ONNX Runtime's scheme) where the file gives none.

`index` is the node's position in graph.node (backend.compat.facts, which also walks If/Loop
bodies, counts their nodes as well). Nothing here imports onnx at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx


def node_name(node: onnx.NodeProto, index: int) -> str:
    """Same in Graph page, cost table, compat facts, profiles: users type it into "keep in FP32"."""
    return node.name or f"{node.op_type}_{index}"
