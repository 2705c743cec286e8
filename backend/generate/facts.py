"""What a generative model's weights are, read from its graph (never from the weights themselves):
bytes per tensor from dims and element type, and every MatMulNBits node's bits and block size.

Every number a variant states comes from here, so "INT4" is what the graph holds, not what was
asked for.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from backend.models.graphread import load_graph, parse_graph

# bits per element of the ONNX tensor types a weight can have
ELEMENT_BITS = {
    1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64, 16: 16,
    17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4, 23: 4,
}  # fmt: skip


@dataclass(frozen=True)
class QuantizedMatMul:
    """One MatMulNBits node: its weight's shape and how it is stored."""

    name: str
    bits: int
    block_size: int
    k: int
    n: int
    accuracy_level: int
    has_zero_points: bool
    weight_bytes: int  # packed weight + scales + zero points


@dataclass
class WeightFacts:
    """Weight bytes of a graph, split into MatMul weights (what weight-only quantization touches)
    and the rest (embeddings, norms, rotary caches)."""

    total_bytes: int = 0
    matmul_bytes: int = 0  # float MatMul weights plus MatMulNBits weights, scales, zero points
    float_matmuls: int = 0  # MatMul nodes whose second input is a stored weight
    quantized: list[QuantizedMatMul] = field(default_factory=list)
    op_counts: dict[str, int] = field(default_factory=dict)

    @property
    def bits(self) -> list[int]:
        return sorted({q.bits for q in self.quantized})

    @property
    def block_sizes(self) -> list[int]:
        return sorted({q.block_size for q in self.quantized})

    def summary(self) -> str:
        """One line saying what the graph holds, with its numbers."""
        mb = self.total_bytes / (1 << 20)
        if not self.quantized:
            return f"{self.float_matmuls} float MatMul weights; {mb:.2f} MB of weights in all"
        bits = "/".join(map(str, self.bits))
        blocks = "/".join(map(str, self.block_sizes))
        return (
            f"{len(self.quantized)} MatMulNBits ({bits}-bit, block {blocks}) and "
            f"{self.float_matmuls} float MatMul weights; {mb:.2f} MB of weights in all"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bits": self.bits, "block_sizes": self.block_sizes}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WeightFacts:
        return cls(
            total_bytes=int(data["total_bytes"]),
            matmul_bytes=int(data["matmul_bytes"]),
            float_matmuls=int(data["float_matmuls"]),
            quantized=[QuantizedMatMul(**q) for q in data["quantized"]],
            op_counts={str(op): int(n) for op, n in data["op_counts"].items()},
        )


def tensor_bytes(tensor: Any) -> int:
    """Stored bytes of an initializer from its dims and type (external data is not read)."""
    count = 1
    for dim in tensor.dims:
        count *= int(dim)
    return (count * ELEMENT_BITS.get(tensor.data_type, 32) + 7) // 8


def weight_facts(model_path: Path) -> WeightFacts:
    """The facts of one .onnx graph; its external data is never loaded, and a graph with its
    weights embedded (an upload's, or what a quantizer child wrote) is parsed in a limited
    child (models.graphread), not in the worker."""
    path = Path(model_path)
    what = f"Reading the weights' layout of {path.name!r}"
    return parse_graph(path, child_weight_facts, what, read=WeightFacts.from_dict)


def child_weight_facts(model_path: str) -> dict[str, Any]:
    import onnx

    model = load_graph(model_path)
    graph = model.graph
    sizes = {t.name: tensor_bytes(t) for t in graph.initializer}
    facts = WeightFacts(total_bytes=sum(sizes.values()))
    facts.op_counts = dict(Counter(node.op_type for node in graph.node))
    for node in graph.node:
        if node.op_type == "MatMul" and len(node.input) > 1 and node.input[1] in sizes:
            facts.float_matmuls += 1
            facts.matmul_bytes += sizes[node.input[1]]
        elif node.op_type == "MatMulNBits":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            stored = sum(sizes.get(name, 0) for name in node.input[1:4] if name)
            facts.matmul_bytes += stored
            facts.quantized.append(
                QuantizedMatMul(
                    name=node.name,
                    bits=int(attrs.get("bits", 4)),
                    block_size=int(attrs["block_size"]),
                    k=int(attrs["K"]),
                    n=int(attrs["N"]),
                    accuracy_level=int(attrs.get("accuracy_level", 0)),
                    has_zero_points=len(node.input) > 3 and bool(node.input[3]),
                    weight_bytes=stored,
                )
            )
    return facts.to_dict()


# ONNX element types a decoder computes or caches in, in our precision names
ELEMENT_NAMES = {1: "fp32", 10: "fp16", 16: "bf16", 11: "fp64"}


@dataclass(frozen=True)
class DecoderTypes:
    """What a GenAI decoder graph computes and caches in, from its own declarations: the logits'
    element type, the past keys' and values', and its MatMulNBits nodes' accuracy levels (what
    ONNX Runtime's CPU kernel quantizes the activations to: 4 is int8)."""

    logits: str
    kv_cache: str
    accuracy_levels: tuple[int, ...]

    def facts(self, device: str) -> dict[str, str]:
        """The facts a point of ONNX Runtime GenAI states (it reports no precision itself)."""
        found = {
            "inference_precision": self.logits,
            "kv_cache_precision": self.kv_cache,
            "precision_from": "the graph's logits and past key/value types",
        }
        if device == "cpu" and 4 in self.accuracy_levels:
            found["int4_compute"] = "MatMulNBits at accuracy level 4: int8 activations"
        return found

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DecoderTypes:
        levels = tuple(sorted({int(level) for level in data["accuracy_levels"]}))
        return cls(str(data["logits"])[:16], str(data["kv_cache"])[:16], levels)


def decoder_types(model_path: Path) -> DecoderTypes:
    """DecoderTypes of one decoder graph, read as weight_facts reads (a child past 16 MiB)."""
    path = Path(model_path)
    what = f"Reading the element types of {path.name!r}"
    return parse_graph(path, child_decoder_types, what, read=DecoderTypes.from_dict)


def child_decoder_types(model_path: str) -> dict[str, Any]:
    import onnx

    graph = load_graph(model_path).graph

    def types(values: Any) -> str:
        found = {ELEMENT_NAMES.get(v.type.tensor_type.elem_type, "?") for v in values}
        return "/".join(sorted(found)) or "?"

    levels = [
        onnx.helper.get_attribute_value(a)
        for node in graph.node
        if node.op_type == "MatMulNBits"
        for a in node.attribute
        if a.name == "accuracy_level"
    ]
    return {
        "logits": types(o for o in graph.output if o.name == "logits"),
        "kv_cache": types(i for i in graph.input if i.name.startswith("past_key_values")),
        "accuracy_levels": levels,
    }
