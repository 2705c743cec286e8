"""Parameters: the weights a model holds, counted one way for the Models page (inspect.py) and
the Graph page's compute cost (cost.py), so the two show one number.

charged_parameters is that one way: each main-graph node is charged the initializers it is the
first to read, from its inputs or from inside its If/Loop/Scan bodies (a then_branch reading an
outer initializer), plus every initializer its bodies hold; what no node reads is counted apart.
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

from backend.models.nodenames import bodies

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


def _outer_reads(graph: onnx.GraphProto) -> list[str]:
    """Names a body reads that it does not define itself (outer-scope values), nested bodies'
    included, in the order first read."""
    defined = {t.name for t in graph.initializer} | {v.name for v in graph.input}
    defined |= {t.values.name for t in graph.sparse_initializer}
    reads: dict[str, None] = {}
    for node in graph.node:
        inner = [n for _attr, sub in bodies(node) for n in _outer_reads(sub)]
        reads.update((n, None) for n in [*node.input, *inner] if n and n not in defined)
        defined.update(node.output)
    return list(reads)


def charged_parameters(graph: onnx.GraphProto) -> tuple[list[int], int]:
    """Parameters charged to each node of `graph` (see the module's docstring), and those of
    the initializers no node reads."""
    left = initializer_parameters(graph)
    charged = []
    for node in graph.node:
        subs = [sub for _attr, sub in bodies(node)]
        reads = [*node.input, *(n for sub in subs for n in _outer_reads(sub))]
        held = sum(total_parameters(sub) for sub in subs)
        charged.append(sum(left.pop(n, 0) for n in reads) + held)
    return charged, sum(left.values())


def total_parameters(graph: onnx.GraphProto) -> int:
    """Every parameter of `graph` and its bodies, each initializer once."""
    charged, unread = charged_parameters(graph)
    return sum(charged) + unread
