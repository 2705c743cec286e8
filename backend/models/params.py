"""Parameters: the weights a model holds, counted one way for the Models page (inspect.py) and
the Graph page's compute cost (cost.py), so the two show one number.

Each initializer counts once, however many nodes read it (a GenAI graph's rotary cos/sin caches
feed every GroupQueryAttention node). A weight-only quantized tensor counts the weights it
represents, not its storage: ONNX Runtime's MatMulNBits packs its K x N weights two or more to a
uint8 byte of B, so B counts K x N, and GatherBlockQuantized's packed uint8 data counts 8/bits
weights a byte; their scales, zero points and group indices only describe that packing and
count 0.
"""

from __future__ import annotations

import math

import onnx
from onnx import helper

MS_DOMAIN = "com.microsoft"
PACKING_INPUTS = {"MatMulNBits": (2, 3, 4), "GatherBlockQuantized": (2, 3)}  # scales, zeros, g_idx


def attribute(node: onnx.NodeProto, name: str, default: object) -> object:
    """A node's attribute value by name, or `default` where the node does not set it."""
    found = next((a for a in node.attribute if a.name == name), None)
    return helper.get_attribute_value(found) if found is not None else default


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    return int(attribute(node, name, default))  # type: ignore[call-overload]


def initializer_parameters(graph: onnx.GraphProto) -> dict[str, int]:
    """Parameters per initializer of `graph` (dense and sparse), as its own nodes read them."""
    counts = {t.name: math.prod(t.dims) for t in graph.initializer}
    counts.update({t.values.name: math.prod(t.dims) for t in graph.sparse_initializer})
    types = {t.name: t.data_type for t in graph.initializer}
    for node in graph.node:
        if node.domain != MS_DOMAIN or node.op_type not in PACKING_INPUTS:
            continue
        inputs = list(node.input)
        for index in PACKING_INPUTS[node.op_type]:
            if index < len(inputs) and inputs[index] in counts:
                counts[inputs[index]] = 0
        packed = inputs[1] if node.op_type == "MatMulNBits" else inputs[0]
        if packed not in counts:
            continue
        if node.op_type == "MatMulNBits":
            counts[packed] = _attr(node, "K", 0) * _attr(node, "N", 0)
        elif types.get(packed) == onnx.TensorProto.UINT8:
            counts[packed] *= 8 // _attr(node, "bits", 4)
    return counts


def graph_parameters(graph: onnx.GraphProto) -> int:
    return sum(initializer_parameters(graph).values())
