"""Per-node facts of an ONNX model: op, domain, resolved op version and element types."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx import TensorProto, TypeProto

from backend.models.nodenames import MAIN, bodies, graph_names, inside

DEFAULT_DOMAINS = ("", "ai.onnx")


def canonical_domain(domain: str) -> str:
    """ONNX writes the default domain as '' or 'ai.onnx'; the kernel registries use ''."""
    return "" if domain in DEFAULT_DOMAINS else domain


def display_domain(domain: str) -> str:
    return "ai.onnx" if canonical_domain(domain) == "" else domain


def type_string(proto: TypeProto) -> str:
    """The type as ONNX Runtime spells it: tensor(float), seq(tensor(int64)), ... or '?'."""
    which = proto.WhichOneof("value")
    if which == "tensor_type":
        if proto.tensor_type.elem_type == 0:
            return "?"
        name = TensorProto.DataType.Name(proto.tensor_type.elem_type).lower()
        return f"tensor({name})"
    if which == "sparse_tensor_type":
        name = TensorProto.DataType.Name(proto.sparse_tensor_type.elem_type).lower()
        return f"sparse_tensor({name})"
    if which == "sequence_type":
        return f"seq({type_string(proto.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"optional({type_string(proto.optional_type.elem_type)})"
    if which == "map_type":
        key = TensorProto.DataType.Name(proto.map_type.key_type).lower()
        return f"map({key},{type_string(proto.map_type.value_type)})"
    return "?"


def short_type(type_str: str) -> str:
    """tensor(float) -> float, for reasons a user reads."""
    if type_str.startswith("tensor(") and type_str.endswith(")"):
        return type_str[7:-1]
    return type_str


@dataclass(frozen=True)
class NodeFacts:
    """One node as the backends see it. Names are unique: unnamed nodes get '<op>_<index>'."""

    index: int
    name: str
    op_type: str
    domain: str  # canonical: '' is the default ONNX domain
    opset: int | None  # the model's opset for this domain
    op_version: int | None  # the schema version that opset resolves to (None: no schema)
    input_types: tuple[str, ...]  # ORT spelling; '' for an omitted optional input
    output_types: tuple[str, ...]
    input_is_initializer: tuple[bool, ...] = ()
    graph: str = MAIN  # 'main', or the body holding the node: "If_2's then_branch" (nodenames)
    has_function: bool = False  # the schema defines a function body ORT can inline
    type_bindings: dict[str, list[str]] = field(default_factory=dict)  # schema param -> types
    attributes: tuple[str, ...] = ()

    @property
    def domain_label(self) -> str:
        return display_domain(self.domain)

    @property
    def main_type(self) -> str:
        """The element type users think of for this node: its first typed input or output."""
        for t in (*self.input_types, *self.output_types):
            if t and t != "?":
                return t
        return "?"


def _schema(op_type: str, version: int, domain: str) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError:
        return None


def resolve_version(op_type: str, domain: str, opset: int | None) -> tuple[int | None, bool]:
    """The since_version of the newest schema at or below the model's opset, and has_function."""
    if opset is None:
        return None, False
    schema = _schema(op_type, opset, domain)
    if schema is None:
        return None, False
    has_function = bool(schema.has_function or schema.has_context_dependent_function)
    return schema.since_version, has_function


def bind_types(
    op_type: str,
    domain: str,
    version: int | None,
    input_types: tuple[str, ...],
    output_types: tuple[str, ...],
) -> dict[str, list[str]]:
    """Map each schema type parameter (T, T1, ...) to the element types the node gives it."""
    if version is None:
        return {}
    schema = _schema(op_type, version, domain)
    if schema is None:
        return {}
    params = {c.type_param_str for c in schema.type_constraints}
    bound: dict[str, list[str]] = {}

    def walk(formals: list, actual: tuple[str, ...]) -> None:
        for i, t in enumerate(actual):
            if not formals:
                return
            formal = formals[min(i, len(formals) - 1)]
            if (
                i >= len(formals)
                and formal.option != onnx.defs.OpSchema.FormalParameterOption.Variadic
            ):
                return
            if not t or t == "?" or formal.type_str not in params:
                continue
            seen = bound.setdefault(formal.type_str, [])
            if t not in seen:
                seen.append(t)

    walk(list(schema.inputs), input_types)
    walk(list(schema.outputs), output_types)
    return bound


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {canonical_domain(o.domain): o.version for o in model.opset_import}


def _collect_types(graph: onnx.GraphProto, types: dict[str, str]) -> None:
    for vi in (*graph.input, *graph.output, *graph.value_info):
        if vi.type.WhichOneof("value"):
            types[vi.name] = type_string(vi.type)
    for init in graph.initializer:
        types[init.name] = f"tensor({TensorProto.DataType.Name(init.data_type).lower()})"
    for node in graph.node:
        for attr in node.attribute:
            for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                _collect_types(sub, types)


def infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """Shape inference for the element types; a model that fails it keeps the types it has."""
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=False)
    except Exception:  # inference is best effort: a bad value_info must not hide the node list
        return model


def read_nodes(model: onnx.ModelProto) -> list[NodeFacts]:
    """Every node, subgraph nodes included, with types from shape inference."""
    inferred = infer(model)
    opsets = _opsets(inferred)
    types: dict[str, str] = {}
    _collect_types(inferred.graph, types)
    facts: list[NodeFacts] = []
    used: set[str] = set()

    def visit(graph: onnx.GraphProto, path: str, initializers: set[str]) -> None:
        inits = initializers | {i.name for i in graph.initializer}
        for node, name in zip(graph.node, graph_names(graph, used), strict=True):
            index = len(facts)
            domain = canonical_domain(node.domain)
            opset = opsets.get(domain)
            version, has_function = resolve_version(node.op_type, domain, opset)
            if version is None and domain not in ("", "ai.onnx.ml") and opset is not None:
                version = opset  # contrib/custom domains: no ONNX schema, the opset is the version
            ins = tuple(types.get(i, "?") if i else "" for i in node.input)
            outs = tuple(types.get(o, "?") if o else "" for o in node.output)
            facts.append(
                NodeFacts(
                    index=index,
                    name=name,
                    op_type=node.op_type,
                    domain=domain,
                    opset=opset,
                    op_version=version,
                    input_types=ins,
                    output_types=outs,
                    input_is_initializer=tuple(i in inits for i in node.input),
                    graph=path,
                    has_function=has_function,
                    type_bindings=bind_types(node.op_type, domain, version, ins, outs),
                    attributes=tuple(a.name for a in node.attribute),
                )
            )
            for attr, sub in bodies(node):
                visit(sub, inside(path, name, attr), inits)

    visit(inferred.graph, MAIN, set())
    return facts


def unique_names(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give unnamed nodes the names read_nodes reports, so placement logs can be matched back."""
    used: set[str] = set()

    def visit(graph: onnx.GraphProto) -> None:
        for node, name in zip(graph.node, graph_names(graph, used), strict=True):
            node.name = name
            for attr in node.attribute:
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    visit(sub)

    visit(model.graph)
    return model


def load_model(path: Path) -> onnx.ModelProto:
    """The graph without external weights: facts need structure and types, not tensor data."""
    return onnx.load(str(path), load_external_data=False)


def node_protos(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The NodeProtos in read_nodes' order (depth first, subgraph nodes after their parent)."""
    out: list[onnx.NodeProto] = []

    def visit(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            out.append(node)
            for attr in node.attribute:
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    visit(sub)

    visit(model.graph)
    return out


def _type_proto(type_str: str) -> TypeProto | None:
    """The TypeProto for an ORT type string; None when it cannot be rebuilt."""
    tp = TypeProto()
    if type_str.startswith("tensor(") and type_str.endswith(")"):
        name = type_str[7:-1].upper()
        if name in TensorProto.DataType.keys():
            tp.tensor_type.elem_type = TensorProto.DataType.Value(name)
            return tp
        return None
    for prefix, field_name in (("seq(", "sequence_type"), ("optional(", "optional_type")):
        if type_str.startswith(prefix) and type_str.endswith(")"):
            inner = _type_proto(type_str[len(prefix) : -1])
            if inner is None:
                return None
            getattr(tp, field_name).elem_type.CopyFrom(inner)
            return tp
    return None


def _function_version(versions: list[int], opset: int) -> int:
    """Function bodies are stored per opset; the body for a model is the newest one <= opset."""
    usable = [v for v in versions if v <= opset]
    return max(usable) if usable else opset


def value_types(model: onnx.ModelProto) -> dict[str, TypeProto]:
    """Every value's full TypeProto (shapes included) after inference, subgraphs included."""
    out: dict[str, TypeProto] = {}

    def visit(graph: onnx.GraphProto) -> None:
        for vi in (*graph.input, *graph.output, *graph.value_info):
            if vi.type.WhichOneof("value"):
                out[vi.name] = vi.type
        for init in graph.initializer:
            out[init.name] = onnx.helper.make_tensor_type_proto(init.data_type, list(init.dims))
        for node in graph.node:
            for attr in node.attribute:
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    visit(sub)

    visit(infer(model).graph)
    return out


def function_body(
    node: onnx.NodeProto, facts: NodeFacts, types: dict[str, TypeProto] | None = None
) -> onnx.FunctionProto | None:
    """The ONNX function body ORT inlines for a node without a kernel (None when it has none).

    Some bodies depend on input shapes (a kernel size, a rank), so full TypeProtos help."""
    types = types or {}
    if facts.opset is None:
        return None
    schema = _schema(facts.op_type, facts.opset, facts.domain)
    if schema is None:
        return None
    try:
        if schema.has_context_dependent_function:
            protos = [
                types.get(name) or (_type_proto(t) if t else TypeProto())
                for name, t in zip(node.input, facts.input_types, strict=False)
            ]
            if any(p is None for p in protos):
                return None  # onnx crashes building a body from unknown input types
            version = _function_version(
                schema.context_dependent_function_opset_versions, facts.opset
            )
            raw = schema.get_context_dependent_function_with_opset_version(
                version, node.SerializeToString(), [p.SerializeToString() for p in protos]
            )
        elif schema.has_function or list(schema.function_opset_versions):
            version = _function_version(schema.function_opset_versions, facts.opset)
            raw = schema.get_function_with_opset_version(version) or schema.function_body
        else:
            return None
    except Exception:  # a body onnx cannot build for this node: treated as no body
        return None
    if not raw:
        return None
    if isinstance(raw, onnx.FunctionProto):
        return raw if raw.node else None
    fn = onnx.FunctionProto()
    fn.ParseFromString(raw)
    return fn if fn.node else None


def expand_function(
    node: onnx.NodeProto,
    facts: NodeFacts,
    body: onnx.FunctionProto,
    types: dict[str, TypeProto] | None = None,
) -> onnx.ModelProto:
    """A model of the function body with the node's attributes and input types bound, so its
    inner nodes get types from shape inference like any other node."""
    rename = {}
    inputs = []
    for i, formal in enumerate(body.input):
        actual = node.input[i] if i < len(node.input) else ""
        if not actual:
            rename[formal] = ""
            continue
        tp = (types or {}).get(actual)
        if tp is None and i < len(facts.input_types):
            tp = _type_proto(facts.input_types[i])
        info = onnx.helper.make_tensor_value_info(formal, 0, None)
        if tp is not None:
            info.type.CopyFrom(tp)
        inputs.append(info)
    given = {a.name: a for a in node.attribute}
    defaults = {a.name: a for a in body.attribute_proto}
    nodes = []
    for inner in body.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        copy.input[:] = [rename.get(x, x) for x in inner.input]
        attrs = []
        for attr in inner.attribute:
            if attr.ref_attr_name:
                source = given.get(attr.ref_attr_name) or defaults.get(attr.ref_attr_name)
                if source is None:
                    continue
                bound = onnx.AttributeProto()
                bound.CopyFrom(source)
                bound.name = attr.name
                attrs.append(bound)
            else:
                attrs.append(attr)
        del copy.attribute[:]
        copy.attribute.extend(attrs)
        nodes.append(copy)
    outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in body.output]
    graph = onnx.helper.make_graph(nodes, f"{facts.op_type}_body", inputs, outputs)
    opsets = list(body.opset_import) or [onnx.helper.make_opsetid(facts.domain, facts.opset)]
    model = onnx.helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model
