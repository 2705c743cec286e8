"""The name of an ONNX node, or '<op>_<index>' (ONNX Runtime's scheme) where the file gives none.

`index` is the node's position in its own graph.node everywhere (an If/Loop/Scan body's nodes
are counted in their body). Nothing here imports onnx at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx


def node_name(node: onnx.NodeProto, index: int) -> str:
    """Same in Graph page, cost table, compat facts, profiles: users type it into "keep in FP32"."""
    return node.name or f"{node.op_type}_{index}"
