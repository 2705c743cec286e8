"""A generative model's bytes: weights from its files, KV cache from its config, and what one
decode step must read (the numerator of the bandwidth roofline)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from backend.errors import UserError

ONNX_ITEM_BYTES = {1: 4, 10: 2, 16: 2, 11: 8, 2: 1, 3: 1, 6: 4, 7: 8, 12: 4, 13: 8}  # TensorProto
ONNX_DTYPE = {1: "fp32", 10: "fp16", 16: "bf16"}
# the inputs that are cos/sin caches, read one row per position, not whole per token
ROTARY_INPUTS = {"GroupQueryAttention": (7, 8), "RotaryEmbedding": (2, 3)}
KV_ITEM_BYTES = {"u8": 1, "i8": 1, "bf16": 2, "fp16": 2, "fp32": 4}  # a runtime's KV type
SCALE_ZERO_POINT_BYTES = 8  # a u8 or u4 cache's f32 scale and f32 zero point


@dataclass(frozen=True)
class KVLayout:
    """How a runtime holds each KV head of each layer where that is more than elements x item
    bytes: OpenVINO's CPU PagedAttention keeps blocks of 32 tokens and, for a u8 or u4 cache,
    an f32 scale and zero point per channel per block (keys, by channel) or per token and group
    of the head (values). Which fields hold for which settings: OpenVinoGenAISession."""

    key_bits: int
    value_bits: int
    key_by_channel: bool
    key_group: int = 0  # head elements per scale and zero point, by token; 0: the whole head
    value_group: int = 0
    block_tokens: int = 1

    def block_bytes(self, head_dim: int) -> int:
        """K and V of one block of one KV head, scales and zero points included."""
        key = self._part(self.key_bits, self.key_by_channel, self.key_group, head_dim)
        return key + self._part(self.value_bits, False, self.value_group, head_dim)

    def _part(self, bits: int, by_channel: bool, group: int, head_dim: int) -> int:
        elements = self.block_tokens * head_dim * bits // 8
        if bits >= 16:  # a float cache: elements only
            return elements
        if by_channel:  # one scale and zero point per channel of the block
            return elements + SCALE_ZERO_POINT_BYTES * head_dim
        groups = head_dim // (group or head_dim)  # the plugin refuses a group that does not divide
        return elements + self.block_tokens * SCALE_ZERO_POINT_BYTES * groups


@dataclass(frozen=True)
class Footprint:
    """What the folder holds and what it costs, all derived from its files."""

    layers: int
    kv_heads: int
    head_dim: int
    kv_item_bytes: int  # bytes of one KV element (the past_key_values inputs' type)
    context_length: int
    weight_bytes: int  # every initializer (MatMulNBits' packed weights, scales and zero points)
    lookup_bytes: int  # tables read a row per token: token embeddings, rotary cos/sin caches
    embedding_row_bytes: int
    precision: str  # "fp32", "fp16", "int4 (MatMulNBits, block 32)", ...
    file_bytes: int  # model files on disk (graph + external data)
    kv_layout: KVLayout | None = None  # as the runtime holds it, where it said (as_held)

    def kv_bytes(self, tokens: int, sequences: int) -> int:
        """2 (K and V) x layers x kv heads x head dim x tokens x sequences x item bytes; with a
        layout, the whole blocks that hold the tokens, scales and zero points included."""
        if self.kv_layout:
            blocks = -(-tokens // self.kv_layout.block_tokens) * sequences
            return self.layers * self.kv_heads * blocks * self.kv_layout.block_bytes(self.head_dim)
        return (
            2
            * self.layers
            * self.kv_heads
            * self.head_dim
            * tokens
            * sequences
            * self.kv_item_bytes
        )

    def bytes_per_step(self, context: float, sequences: int) -> float:
        """Bytes one decode step reads: every weight once (of the lookup tables only the rows of
        the tokens fed), plus the KV cache of `context` tokens per sequence."""
        weights = self.weight_bytes - self.lookup_bytes + self.embedding_row_bytes * sequences
        if self.kv_layout:  # per token, a block's scales and zero points shared by its tokens
            token = self.kv_layout.block_bytes(self.head_dim) / self.kv_layout.block_tokens
            return weights + self.layers * self.kv_heads * context * sequences * token
        kv = 2 * self.layers * self.kv_heads * self.head_dim * context * sequences
        return weights + kv * self.kv_item_bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def as_held(shape: Footprint, facts: dict[str, Any]) -> Footprint:
    """The footprint with the KV cache as the runtime's facts say it holds it: in the type of
    kv_cache_precision and, where they give one, the layout of kv_cache_layout."""
    held = KV_ITEM_BYTES.get(facts.get("kv_cache_precision", ""))
    if held:  # the runtime keeps its KV cache in another type than the model's state
        shape = replace(shape, kv_item_bytes=held)
    if layout := facts.get("kv_cache_layout"):
        shape = replace(shape, kv_layout=KVLayout(**layout))
    return shape


def _genai_config(folder: Path) -> dict[str, Any]:
    path = folder / "genai_config.json"
    if not path.is_file():
        raise UserError(f"{folder.name} has no genai_config.json; it is not a GenAI model folder.")
    try:
        return json.loads(path.read_text())["model"]
    except (ValueError, KeyError) as exc:
        raise UserError(f"{folder.name}'s genai_config.json cannot be read ({exc}).") from None


def footprint(folder: Path) -> Footprint:
    """Read genai_config.json and the graph (without its external data) of a GenAI folder, or
    config.json and the IR of an OpenVINO GenAI folder."""
    import onnx

    folder = Path(folder)
    if (folder / "openvino_model.xml").is_file() and not (folder / "genai_config.json").is_file():
        return openvino_footprint(folder)
    config = _genai_config(folder)
    decoder = config["decoder"]
    graph_path = folder / decoder.get("filename", "model.onnx")
    model = onnx.load(str(graph_path), load_external_data=False)
    graph = model.graph
    sizes: dict[str, int] = {}
    float_bytes: dict[str, int] = {}
    for tensor in graph.initializer:
        count = int(np.prod(tensor.dims)) if tensor.dims else 1
        sizes[tensor.name] = count * ONNX_ITEM_BYTES.get(tensor.data_type, 4)
        label = ONNX_DTYPE.get(tensor.data_type)
        if label:
            float_bytes[label] = float_bytes.get(label, 0) + sizes[tensor.name]
    lookups: set[str] = set()
    row = 0
    nbits = [n for n in graph.node if n.op_type == "MatMulNBits"]
    for node in graph.node:
        if node.op_type == "Gather" and node.input[0] in sizes and not row:
            tensor = next(t for t in graph.initializer if t.name == node.input[0])
            lookups.add(tensor.name)
            row = sizes[tensor.name] // max(int(tensor.dims[0]), 1)
        rotary = ROTARY_INPUTS.get(node.op_type, ())
        lookups.update(n for i, n in enumerate(node.input) if i in rotary and n in sizes)
    if nbits:
        attrs = {a.name: a.i for a in nbits[0].attribute}
        precision = f"int{attrs.get('bits', 4)} (MatMulNBits, block {attrs.get('block_size', '?')})"
    else:
        precision = max(float_bytes, key=float_bytes.get) if float_bytes else "unknown"
    kv_type = next(
        (
            i.type.tensor_type.elem_type
            for i in graph.input
            if "past_key_values" in i.name or i.name.startswith("past_key")
        ),
        1,
    )
    on_disk = [graph_path, *(p for p in folder.iterdir() if p.suffix == ".data")]
    return Footprint(
        layers=int(decoder["num_hidden_layers"]),
        kv_heads=int(decoder["num_key_value_heads"]),
        head_dim=int(decoder["head_size"]),
        kv_item_bytes=ONNX_ITEM_BYTES.get(kv_type, 4),
        context_length=int(config.get("context_length", 0)),
        weight_bytes=sum(sizes.values()),
        lookup_bytes=sum(sizes[name] for name in lookups),
        embedding_row_bytes=row,
        precision=precision,
        file_bytes=sum(p.stat().st_size for p in on_disk if p.is_file()),
    )


def openvino_footprint(folder: Path) -> Footprint:
    """An OpenVINO IR folder: shape from the HF config.json, bytes from the IR's constants."""
    import openvino as ov

    from backend.generate.ovexport import ir_facts

    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{folder.name} has no readable config.json ({exc}).") from None
    model = ov.Core().read_model(str(folder / "openvino_model.xml"))
    by_type = ir_facts(model)["bytes_by_type"]
    hidden, vocab = int(config["hidden_size"]), int(config["vocab_size"])
    heads = int(config["num_attention_heads"])
    floats = {k: v for k, v in by_type.items() if k in ("f32", "f16", "bf16")}
    precision = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}.get(
        max(floats, key=floats.get) if floats else "", "unknown"
    )
    if by_type.get("u4", 0) + by_type.get("i4", 0) > sum(floats.values()) / 8:
        precision = "int4 (OpenVINO weight compression)"
    elif by_type.get("u8", 0) + by_type.get("i8", 0) > sum(floats.values()):
        precision = "int8 (OpenVINO weight compression)"
    row = hidden * (2 if precision == "fp16" else 4)
    table = embedding_table_bytes(model)  # NNCF keeps it u8 with scales: far below vocab x row
    return Footprint(
        layers=int(config["num_hidden_layers"]),
        kv_heads=int(config.get("num_key_value_heads", heads)),
        head_dim=int(config.get("head_dim") or hidden // heads),
        kv_item_bytes=4,  # the IR's state type; the plugin holds it otherwise (as_held)
        context_length=int(config.get("max_position_embeddings", 0)),
        weight_bytes=int(sum(by_type.values())),
        lookup_bytes=table or vocab * row,
        embedding_row_bytes=table // vocab if table else row,
        precision=precision,
        file_bytes=sum(p.stat().st_size for p in folder.glob("openvino_model.*")),
    )


# the ops between an embedding table's constants and its Gather: NNCF's decompression
DECOMPRESSION = {"Convert", "Subtract", "Multiply", "Reshape", "Constant"}


def embedding_table_bytes(model: Any) -> int:
    """The bytes of the token embedding as the IR stores it (table, scales, zero points): the
    constants behind the Gather that input_ids index; 0 where no such Gather is found."""

    def source(value: Any) -> Any:
        node = value.get_node()
        while node.get_type_name() == "Convert":
            node = node.input_value(0).get_node()
        return node

    for op in model.get_ordered_ops():
        if op.get_type_name() != "Gather" or op.get_input_size() < 2:
            continue
        indices = source(op.input_value(1))
        if indices.get_type_name() != "Parameter" or indices.get_friendly_name() != "input_ids":
            continue
        found, todo, seen = 0, [op.input_value(0).get_node()], set()
        while todo:
            node = todo.pop()
            if node.get_friendly_name() in seen or node.get_type_name() not in DECOMPRESSION:
                continue
            seen.add(node.get_friendly_name())
            if node.get_type_name() == "Constant":
                found += int(node.get_byte_size())
            todo += [node.input_value(i).get_node() for i in range(node.get_input_size())]
        return found
    return 0
