"""Static model cost from the graph alone: FLOPs, parameters and activation bytes per node.

Shapes come from ONNX shape inference after the batch and named dimensions are fixed, so the
numbers are for one batch size. Matrix ops (Conv, ConvTranspose, MatMul, Gemm, Einsum, Attention,
and ONNX Runtime's GroupQueryAttention and MatMulNBits) count two FLOPs per multiply-accumulate;
elementwise ops one per output element; pooling and normalisation a few per element (constants
below). Ops with no rule count 0 and are listed, so a
total never hides what it left out. Data-movement ops (Reshape, Transpose, Gather...) cost 0.

Why long: the per-operator rules, the fixing of free dimensions and the shape inference they read
are one computation; split, a rule would be separated from the shapes it is written against.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import onnx
from onnx import shape_inference

import settings
from backend import ort_tools
from backend.errors import UserError
from backend.models.inspect import value_info
from backend.models.nodenames import node_name
from backend.models.params import attribute, charged_parameters

MB = 1 << 20

ELEMENTWISE = {
    "Abs", "Add", "And", "BitShift", "Ceil", "Celu", "Clip", "Cos", "Div", "Elu", "Equal", "Erf",
    "Exp", "Floor", "Gelu", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Less",
    "LessOrEqual", "LeakyRelu", "Log", "Max", "Mean", "Min", "Mish", "Mod", "Mul", "Neg", "Not",
    "Or", "PRelu", "Pow", "Reciprocal", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin",
    "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Where", "Xor",
    "QuantizeLinear", "DequantizeLinear", "Dropout",
}  # fmt: skip
FREE = {
    "Cast", "CastLike", "Concat", "Constant", "ConstantOfShape", "DepthToSpace", "Expand",
    "Flatten", "Gather", "GatherElements", "GatherND", "Identity", "NonZero", "Pad", "Range",
    "Reshape", "Resize", "ScatterElements", "ScatterND", "Shape", "Size", "Slice", "SpaceToDepth",
    "Split", "Squeeze", "Tile", "Transpose", "Unsqueeze", "ArgMax", "ArgMin", "TopK",
}  # fmt: skip
PER_ELEMENT = {  # FLOPs per output element (normalisations: subtract, scale, shift...)
    "BatchNormalization": 2,
    "InstanceNormalization": 5,
    "LayerNormalization": 5,
    "GroupNormalization": 5,
    "SkipLayerNormalization": 6,
    "Softmax": 3,
    "LogSoftmax": 4,
    "SimplifiedLayerNormalization": 4,  # RMSNorm: square, sum, scale by 1/rms, times gamma
    "SkipSimplifiedLayerNormalization": 5,  # the residual add, then RMSNorm
    "RotaryEmbedding": 3,  # x*cos + rotate(x)*sin
}
REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"}
GLOBAL_POOL = {"GlobalAveragePool", "GlobalMaxPool"}
DTYPE_BYTES = {
    onnx.TensorProto.FLOAT: 4,
    onnx.TensorProto.FLOAT16: 2,
    onnx.TensorProto.BFLOAT16: 2,
    onnx.TensorProto.DOUBLE: 8,
    onnx.TensorProto.INT8: 1,
    onnx.TensorProto.UINT8: 1,
    onnx.TensorProto.INT32: 4,
    onnx.TensorProto.INT64: 8,
    onnx.TensorProto.BOOL: 1,
}


@dataclass(frozen=True)
class NodeCost:
    """One node's FLOPs, parameters (of the initializers first read here: params.py) and output
    bytes."""

    name: str
    op_type: str
    flops: int
    params: int
    activation_bytes: int
    counted: bool  # False: no rule for this op (or shapes unknown), so its 0 FLOPs are a gap


@dataclass(frozen=True)
class ModelCost:
    """Per-node costs and totals of one model at one batch size."""

    batch_size: int
    nodes: tuple[NodeCost, ...]
    uncounted_ops: tuple[str, ...] = field(default=())  # op types counted as 0 for lack of a rule
    unread_params: int = 0  # initializers no node reads: no node's row, still the model's weights

    @property
    def flops(self) -> int:
        return sum(n.flops for n in self.nodes)

    @property
    def params(self) -> int:
        return sum(n.params for n in self.nodes) + self.unread_params

    @property
    def activation_bytes(self) -> int:
        return sum(n.activation_bytes for n in self.nodes)

    @property
    def flops_per_sample(self) -> float:
        return self.flops / self.batch_size

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON, so a child can count and the parent only reads the numbers."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCost:
        return cls(
            int(data["batch_size"]),
            tuple(NodeCost(**node) for node in data["nodes"]),
            tuple(data.get("uncounted_ops", ())),
            int(data.get("unread_params", 0)),
        )


Shape = list[int]


class _Shapes:
    """Static shapes and element types of every named value after inference."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.shape: dict[str, Shape | None] = {}
        self.dtype: dict[str, int] = {}
        for value in [*graph.input, *graph.value_info, *graph.output]:
            tensor = value.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
            known = tensor.HasField("shape") and all(d > 0 for d in dims)
            self.shape[value.name] = dims if known else None
            self.dtype[value.name] = tensor.elem_type
        for init in graph.initializer:
            self.shape[init.name] = list(init.dims)
            self.dtype[init.name] = init.data_type

    def of(self, name: str) -> Shape | None:
        return self.shape.get(name)


def _count(shape: Shape | None) -> int:
    return math.prod(shape) if shape is not None else 0


def _conv(node: onnx.NodeProto, s: _Shapes) -> int | None:
    weight, out = s.of(node.input[1]), s.of(node.output[0])
    if weight is None or out is None:
        return None
    per_output = math.prod(weight[1:])  # (Cin / group) x kernel
    return 2 * _count(out) * per_output


def _conv_transpose(node: onnx.NodeProto, s: _Shapes) -> int | None:
    x, weight = s.of(node.input[0]), s.of(node.input[1])
    if x is None or weight is None:
        return None
    return 2 * _count(x) * math.prod(weight[1:])  # weight: Cin x (Cout / group) x kernel


def _qlinear_conv(node: onnx.NodeProto, s: _Shapes) -> int | None:
    """QLinearConv reads x, x_scale, x_zero_point, w...: the weight is the fourth input."""
    weight, out = s.of(node.input[3]), s.of(node.output[0])
    return 2 * _count(out) * math.prod(weight[1:]) if weight and out else None


def _matmul(node: onnx.NodeProto, s: _Shapes) -> int | None:
    a, out = s.of(node.input[0]), s.of(node.output[0])
    if a is None or out is None:
        return None
    return 2 * _count(out) * a[-1]


def _gemm(node: onnx.NodeProto, s: _Shapes) -> int | None:
    a, out = s.of(node.input[0]), s.of(node.output[0])
    if a is None or out is None:
        return None
    k = a[0] if int(attribute(node, "transA", 0)) else a[-1]
    bias = _count(out) if len(node.input) > 2 and node.input[2] else 0
    return 2 * _count(out) * k + bias


def _einsum(node: onnx.NodeProto, s: _Shapes) -> int | None:
    """Two FLOPs per point of the full index space (every distinct letter's size multiplied)."""
    raw = attribute(node, "equation", b"")
    equation = (raw.decode() if isinstance(raw, bytes) else str(raw)).replace(" ", "")
    inputs = equation.split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, name in zip(inputs, node.input, strict=False):
        shape = s.of(name)
        if shape is None or "." in term or len(term) != len(shape):
            return None
        sizes.update(zip(term, shape, strict=True))
    return 2 * math.prod(sizes.values())


def _attention(node: onnx.NodeProto, s: _Shapes) -> int | None:
    """ONNX Attention (Q, K, V as B x H x S x D or B x S x hidden): QK^T and the weighted V.

    Other layouts (ONNX Runtime's Attention takes an input, its QKV weights and a bias; its
    MultiHeadAttention may take a B x H x L x D key with a 3-D query) are left uncounted."""
    q, k, v = (s.of(n) for n in node.input[:3])
    if q is None or k is None or v is None or not len(q) == len(k) == len(v) in (3, 4):
        return None
    if len(q) == 4:
        return 2 * q[0] * q[1] * q[2] * k[2] * (q[3] + v[3])
    return 2 * q[0] * q[1] * k[1] * (q[2] + v[2])  # heads folded into hidden


def _group_query_attention(node: onnx.NodeProto, s: _Shapes) -> int | None:
    """ONNX Runtime's GroupQueryAttention (com.microsoft), from its query and past-key shapes.

    Every one of num_heads query heads scores S new positions against T = past + S keys (capped
    by local_window_size) and weights as many values: 2*B*H*S*T*D FLOPs each for Q.K^T and
    for .V, plus 3 per score for the scaled softmax and, with do_rotary, 3 per rotated query
    and key element. kv_num_heads only sets how a packed QKV query splits into head size D.
    """
    query = s.of(node.input[0])
    past = s.of(node.input[3]) if len(node.input) > 3 and node.input[3] else None
    heads, kv_heads = int(attribute(node, "num_heads", 0)), int(attribute(node, "kv_num_heads", 0))
    if query is None or len(query) != 3 or heads <= 0 or kv_heads <= 0:
        return None
    batch, seq, hidden = query
    packed = len(node.input) < 2 or not node.input[1]  # Q, K and V in one input
    head_size = hidden // (heads + 2 * kv_heads) if packed else hidden // heads
    total = seq + (past[2] if past is not None and len(past) == 4 else 0)
    window = int(attribute(node, "local_window_size", -1))
    total = min(total, window) if window > 0 else total
    scores = batch * heads * seq * total
    rotating = attribute(node, "do_rotary", 0)
    rotary = 3 * batch * seq * (heads + kv_heads) * head_size if rotating else 0
    return 2 * scores * head_size * 2 + 3 * scores + rotary


def _matmul_nbits(node: onnx.NodeProto, s: _Shapes) -> int | None:
    """ONNX Runtime's MatMulNBits: A (..., K) times the K x N weights its attributes declare."""
    out = s.of(node.output[0])
    k = int(attribute(node, "K", 0))
    if out is None or k <= 0:
        return None
    bias = _count(out) if len(node.input) > 5 and node.input[5] else 0
    return 2 * _count(out) * k + bias


def _pool(node: onnx.NodeProto, s: _Shapes) -> int | None:
    out = s.of(node.output[0])
    kernel = list(attribute(node, "kernel_shape", []))
    return _count(out) * math.prod(kernel) if out is not None and kernel else None


def _input_elements(node: onnx.NodeProto, s: _Shapes) -> int | None:
    x = s.of(node.input[0])
    return _count(x) if x is not None else None


RULES: dict[str, Callable[[onnx.NodeProto, _Shapes], int | None]] = {
    "Conv": _conv,
    "ConvInteger": _conv,
    "QLinearConv": _qlinear_conv,
    "ConvTranspose": _conv_transpose,
    "MatMul": _matmul,
    "MatMulInteger": _matmul,
    "Gemm": _gemm,
    "Einsum": _einsum,
    "Attention": _attention,
    "MultiHeadAttention": _attention,
    "GroupQueryAttention": _group_query_attention,
    "MatMulNBits": _matmul_nbits,
    "MaxPool": _pool,
    "AveragePool": _pool,
    **{op: _input_elements for op in GLOBAL_POOL | REDUCE},
}


def _node_flops(node: onnx.NodeProto, s: _Shapes) -> int | None:
    """FLOPs of one node, or None when no rule applies or its shapes are unknown."""
    if node.op_type in FREE:
        return 0
    out = s.of(node.output[0]) if node.output else None
    if node.op_type in ELEMENTWISE:
        return _count(out) if out is not None else None
    if node.op_type in PER_ELEMENT:
        return PER_ELEMENT[node.op_type] * _count(out) if out is not None else None
    rule = RULES.get(node.op_type)
    return rule(node, s) if rule else None


def _fix_inputs(model: onnx.ModelProto, batch_size: int, dims: dict[str, int]) -> int:
    """Give every symbolic input dimension a value: named ones from dims, a leading one batch.

    Returns the batch the graph now has (a model with a fixed leading dim keeps its own).
    """
    initializers = {i.name for i in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers]
    missing = free_dims([value_info(v) for v in inputs], dims)  # the Graph page asks the same
    if missing:
        raise UserError(missing_dims_sentence(missing))
    for value in inputs:  # every free dimension left is named in dims or leads (the batch)
        for dim in value.type.tensor_type.shape.dim:
            if not (dim.HasField("dim_value") and dim.dim_value > 0):
                dim.dim_value = dims.get(dim.dim_param, batch_size)
    _check_input_size(inputs)
    leading = [v.type.tensor_type.shape.dim for v in inputs if v.type.tensor_type.shape.dim]
    return leading[0][0].dim_value if leading else batch_size


def missing_dims_sentence(names: list[str], subject: str = "The model") -> str:
    """Every free dimension at once, with an example in the model's own names (an unnamed one,
    shown as input[axis], has no name to give a value by, so it gets no example)."""
    first, rest = names[0], names[1:]
    more = f" and {len(rest)} more ({', '.join(repr(n) for n in rest)})" if rest else ""
    values = example_dims(names)
    example = f" (e.g. {values})" if values else ""
    return (
        f"{subject} has a free dimension {first!r}{more} without a value; give "
        f"{'each' if rest else 'it'} a value{example} to count FLOPs."
    )


def example_dims(names: list[str]) -> str:
    """'sequence_length=128, past_sequence_length=0' for the named ones of `names`: a cache's
    past length 0 and every other length 128 agree with each other (total = past + new), a
    128-token prompt's first pass."""
    named = [n for n in names if "[" not in n]
    return ", ".join(f"{n}={0 if 'past' in n.lower() else 128}" for n in named)


def free_dims(inputs: list[dict[str, Any]], given: dict[str, int]) -> list[str]:
    """The free dimensions _fix_inputs would still lack, from inputs as inspect describes them
    (name, dtype, shape): named ones not in `given` and unnamed ones ('input[axis]'), the
    leading one of each input left to the batch size."""
    missing: dict[str, None] = {}
    for value in inputs:
        for index, dim in enumerate(value.get("shape") or []):
            if isinstance(dim, int) and dim > 0 or dim in given or index == 0:
                continue
            named = isinstance(dim, str) and dim != "?"
            missing[dim if named else f"{value['name']}[{index}]"] = None
    return list(missing)


def _check_input_size(inputs: list[onnx.ValueInfoProto]) -> None:
    """The fixed inputs against the input limit a measurement has, before inference sizes
    anything from them (Python integers: a dimension of 10^9 costs nothing to refuse)."""
    limit_mb = settings.MAX_INPUT_MB.get()
    total = 0
    for value in inputs:
        tensor = value.type.tensor_type
        dims = [d.dim_value for d in tensor.shape.dim]
        total += math.prod(dims) * DTYPE_BYTES.get(tensor.elem_type, 4)
        if total > limit_mb * MB:
            raise UserError(
                f"Input {value.name!r} at shape {dims} takes {total / MB:,.0f} MB, over the "
                f"input limit of {limit_mb} MB (OPTIBOARD_MAX_INPUT_MB); use a smaller batch "
                "size or smaller values for the other dimensions."
            )


def _unknown_outputs(model: onnx.ModelProto) -> int:
    shapes = _Shapes(model.graph)
    return sum(
        1
        for node in model.graph.node
        if node.op_type not in FREE and node.output and shapes.of(node.output[0]) is None
    )


def _symbolic_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX Runtime's symbolic shape inference, keeping what it inferred even when incomplete.

    Its infer_shapes() saves a debugging copy of the model into the current directory and raises
    when any shape stays unknown; the same steps without that keep the working tree clean.
    """
    ort_tools.without_torch()
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    inference = SymbolicShapeInference(2**31 - 1, True, False, 0)  # auto_merge on
    inference._preprocess(model)
    while inference.run_:
        inference._infer_impl()
    inference._update_output_from_vi()
    return inference.out_mp_


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX shape inference; where it leaves shapes unknown (Reshape targets computed from Shape
    ops, as in exported transformers), ONNX Runtime's symbolic inference is tried as well."""
    try:
        inferred = shape_inference.infer_shapes(model, data_prop=True, strict_mode=True)
    except (shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"ONNX shape inference failed, so FLOPs cannot be counted at this shape: {first}."
        ) from exc
    if not _unknown_outputs(inferred):
        return inferred
    try:
        symbolic = _symbolic_shapes(model)
    except MemoryError:  # the child's memory limit: said as such, not hidden behind ONNX's answer
        raise
    except Exception:  # its own assertion errors on graphs it cannot follow: keep ONNX's answer
        return inferred
    return symbolic if _unknown_outputs(symbolic) < _unknown_outputs(inferred) else inferred


def model_cost(
    model: onnx.ModelProto | Path, batch_size: int = 1, dims: dict[str, int] | None = None
) -> ModelCost:
    """Cost of the main graph at this batch size. FLOPs inside If/Loop bodies are not counted;
    their weights are, charged to the node holding the body (params.charged_parameters)."""
    if isinstance(model, Path):
        model = onnx.load(str(model), load_external_data=False)
    else:  # the caller's model stays as it was
        model = onnx.ModelProto.FromString(model.SerializeToString())
    batch_size = _fix_inputs(model, batch_size, dict(dims or {}))
    del model.graph.value_info[:]
    inferred = _infer(model)
    shapes = _Shapes(inferred.graph)
    charged, unread = charged_parameters(inferred.graph)  # each to its first reader: params.py
    nodes, uncounted = [], []
    for index, (node, params) in enumerate(zip(inferred.graph.node, charged, strict=True)):
        flops = _node_flops(node, shapes)
        if flops is None:
            uncounted.append(node.op_type)
        activation = sum(
            _count(shapes.of(n)) * DTYPE_BYTES.get(shapes.dtype.get(n, 0), 4)
            for n in node.output
            if n
        )
        name = node_name(node, index)
        nodes.append(
            NodeCost(name, node.op_type, flops or 0, params, activation, flops is not None)
        )
    return ModelCost(batch_size, tuple(nodes), tuple(sorted(set(uncounted))), unread)


RESNET50_GFLOPS = (7.0, 9.0)  # torchvision resnet50: 4.1 GMACs = 8.2 GFLOPs per 224x224 image
RESNET50_MIN_CONVS = 49  # 53 Conv nodes, fewer once ORT-style fusions fold none away


def resnet50_like(flops_per_sample: float, conv_count: int, image_shape: list[int]) -> bool:
    """Matched by shape and cost, not by name: one 3x224x224 image input, at least 49 Conv
    nodes and 7-9 GFLOPs per image (torchvision's resnet50 is 53 Convs and 8.2 GFLOPs)."""
    low, high = RESNET50_GFLOPS
    return (
        list(image_shape[-3:]) == [3, 224, 224]
        and conv_count >= RESNET50_MIN_CONVS
        and low <= flops_per_sample / 1e9 <= high
    )
