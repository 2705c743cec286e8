"""Validate an ONNX file and summarise it (opset, I/O, ops, parameters) for the model library."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import chdir, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper

from backend.errors import UserError
from backend.models.accepted import ACCEPTED_UPLOADS
from backend.models.params import total_parameters

PROTOBUF_LIMIT = 2**31 - 1
ORT_MEMORY_MARKER = "*/_ORT_MEM_ADDR_/*"  # ONNX Runtime's in-memory initializer location
DEFAULT_DOMAINS = ("", "ai.onnx")
MS_DOMAIN = "com.microsoft"  # ONNX Runtime's contrib operators
KNOWN_DOMAINS = (*DEFAULT_DOMAINS, "ai.onnx.ml", MS_DOMAIN, "ai.onnx.preview.training")


@dataclass
class ModelMetadata:
    opset: int | None
    ir_version: int
    producer: str | None
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    op_histogram: dict[str, int] = field(default_factory=dict)
    parameter_count: int = 0
    node_count: int = 0
    custom_domains: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    runtime_ops: list[str] = field(default_factory=list)  # ONNX Runtime's own ops: not a warning

    def to_dict(self) -> dict[str, Any]:
        """The keys model_store.create_model(metadata=...) reads, plus custom_domains."""
        return asdict(self)


def load_proto(path: Path, display_name: str | None = None) -> onnx.ModelProto:
    """The model graph without external tensor data, or a UserError saying why it can't be read."""
    path = Path(path)
    shown = display_name or path.name
    size = path.stat().st_size
    if size == 0:
        raise UserError(f"The file {shown!r} is empty; upload the .onnx file again.")
    if size > PROTOBUF_LIMIT:
        raise UserError(
            f"The file {shown!r} is larger than 2 GB, which one ONNX protobuf cannot hold; "
            "export it with external data and upload the .onnx and its data files as a zip."
        )
    with open(path, "rb") as handle:
        # onnx writes ir_version (field 1, varint) first, so real ONNX files start with 0x08.
        starts_like_onnx = handle.read(1) == b"\x08"
    try:
        model = onnx.load(str(path), load_external_data=False)
        complete = bool(model.ir_version and model.HasField("graph") and model.opset_import)
    except (DecodeError, RuntimeWarning, ValueError):
        complete = False
    if not complete:
        if starts_like_onnx:
            raise UserError(
                f"The file {shown!r} is a truncated or damaged ONNX file (its protobuf does not "
                "parse to a complete model); upload the complete .onnx file again."
            )
        raise UserError(f"The file {shown!r} is not an ONNX model; upload {ACCEPTED_UPLOADS}.")
    return model


def value_info(value: onnx.ValueInfoProto) -> dict[str, Any]:
    """A graph input's or output's name, element type and shape (a name for a free dim)."""
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        return {"name": value.name, "dtype": kind or "unknown", "shape": None}
    tensor = value.type.tensor_type
    try:
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
    except (KeyError, TypeError, ValueError):
        dtype = TensorProto.DataType.Name(tensor.elem_type).lower()
    if dtype == "uint16" and tensor.elem_type == TensorProto.BFLOAT16:
        dtype = "bfloat16"
    shape: list[int | str] | None = None
    if tensor.HasField("shape"):
        shape = []
        for dim in tensor.shape.dim:
            if dim.HasField("dim_value"):
                shape.append(int(dim.dim_value))
            elif dim.dim_param:
                shape.append(dim.dim_param)
            else:
                shape.append("?")
    return {"name": value.name, "dtype": dtype, "shape": shape}


def _graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    """The graph and every subgraph (If/Loop/Scan bodies), depth first."""
    found = [graph]
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                found += _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    found += _graphs(sub)
    return found


def _count(dims: Any) -> int:
    return math.prod(int(d) for d in dims)


def op_histogram(model: onnx.ModelProto) -> dict[str, int]:
    """Node count per op, subgraphs included; ops outside the default domain as 'domain::Op'."""
    counts: dict[str, int] = {}
    for graph in _graphs(model.graph):
        for node in graph.node:
            key = (
                node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}::{node.op_type}"
            )
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def inspect_model(
    path: Path, display_name: str | None = None, lenient: bool = False
) -> ModelMetadata:
    """Check the model, infer shapes and summarise it; invalid models raise UserError.

    External data is never read: parameter counts come from the tensor dims in the graph.
    ONNX Runtime's own operators (runtime_ops) are valid for the runtime that runs the model, so
    they are listed, never warned about. `lenient` (ONNX Runtime GenAI graphs) turns any other
    checker error into a warning.
    """
    path = Path(path)
    shown = display_name or path.name
    model = load_proto(path, shown)
    opset = next((int(o.version) for o in model.opset_import if o.domain in DEFAULT_DOMAINS), None)
    runtime = runtime_ops(model, opset)
    try:
        with _runtime_ops_aside(model, runtime):
            warnings = _validate(path, model, shown, opset, bool(runtime), shapes_used=not lenient)
    except UserError as exc:
        if not lenient:
            raise
        warnings = [f"{exc} (kept: ONNX Runtime GenAI checks the graph itself when it loads it)"]
    parameters, nodes, custom, custom_warnings = _scan_graphs(model)
    initializer_names = {t.name for t in model.graph.initializer}
    producer = " ".join(p for p in (model.producer_name, model.producer_version) if p) or None
    return ModelMetadata(
        opset=opset,
        ir_version=int(model.ir_version),
        producer=producer,
        inputs=[value_info(v) for v in model.graph.input if v.name not in initializer_names],
        outputs=[value_info(v) for v in model.graph.output],
        op_histogram=op_histogram(model),
        parameter_count=parameters,
        node_count=nodes,
        custom_domains=custom,
        warnings=warnings + custom_warnings,
        runtime_ops=sorted({f"{domain or 'ai.onnx'}::{op}" for domain, op in runtime}),
    )


def _ort_schemas() -> set[tuple[str, str]]:
    """(domain, op) of every operator this ONNX Runtime registers, contrib ops included."""
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema

    return {(s.domain, s.name) for s in get_all_operator_schema()}


def runtime_ops(model: onnx.ModelProto, opset: int | None) -> set[tuple[str, str]]:
    """ONNX Runtime's own operators the model uses, subgraphs included: its com.microsoft ops,
    and ops in the default domain that onnx has no schema for at the model's opset but ONNX
    Runtime registers there (GenAI graphs' SimplifiedLayerNormalization)."""
    used = {
        (node.domain, node.op_type)
        for graph in _graphs(model.graph)
        for node in graph.node
        if node.domain == MS_DOMAIN
        or (
            node.domain in DEFAULT_DOMAINS
            and not onnx.defs.has(node.op_type, opset or onnx.defs.onnx_opset_version())
        )
    }
    if not used:
        return set()
    registered = _ort_schemas()  # imported only when the graph needs it (a child's memory)
    return {(d, op) for d, op in used if (d if d != "ai.onnx" else "", op) in registered}


@contextmanager
def _runtime_ops_aside(model: onnx.ModelProto, runtime: set[tuple[str, str]]) -> Iterator[None]:
    """Default-domain ONNX Runtime ops moved to com.microsoft while onnx checks the model, which
    skips that domain as it does for the contrib ops already there; restored afterwards."""
    moved = [
        node
        for graph in _graphs(model.graph)
        for node in graph.node
        if node.domain in DEFAULT_DOMAINS and (node.domain, node.op_type) in runtime
    ]
    added = not any(o.domain == MS_DOMAIN for o in model.opset_import) and bool(moved)
    domains = [node.domain for node in moved]
    for node in moved:
        node.domain = MS_DOMAIN
    if added:
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    try:
        yield
    finally:
        for node, domain in zip(moved, domains, strict=True):
            node.domain = domain
        if added:
            del model.opset_import[-1]


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _validate(
    path: Path,
    model: onnx.ModelProto,
    shown: str,
    opset: int | None,
    checked_in_memory: bool,
    shapes_used: bool = True,
) -> list[str]:
    """Raise UserError when the model is not valid ONNX; warn about what only limits it.

    The file is checked as stored (so external data files are checked for existence and
    location beside it), or, when ONNX Runtime ops were set aside in `model` for the check, that
    proto from the file's folder, which onnx resolves external data locations against then.
    A failed strict shape inference is a warning only where `shapes_used`: a GenAI decoder is
    quantized and run by ONNX Runtime's own tools, never by the optimizations that need onnx's
    shapes, and the model builder's graphs fail strict inference on a constant's declared rank.
    """
    warnings: list[str] = []
    try:
        if checked_in_memory:
            with chdir(path.parent):  # process-wide: inspect_model runs only in parse children
                onnx.checker.check_model(model, full_check=False)
        else:
            onnx.checker.check_model(str(path), full_check=False)
    except onnx.checker.ValidationError as exc:
        raise UserError(
            f"The model {shown!r} is not valid ONNX ({_first_line(exc)}); re-export it or fix "
            "the graph."
        ) from None
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        if shapes_used:
            warnings.append(
                f"Shape inference failed ({_first_line(exc)}); shapes inside the graph are "
                "unknown, which some optimizations need."
            )
    latest = onnx.defs.onnx_opset_version()
    if opset is not None and opset > latest:
        warnings.append(
            f"The model uses opset {opset}, newer than {latest} that this onnx knows; "
            "some tools may refuse it."
        )
    return warnings


def _scan_graphs(model: onnx.ModelProto) -> tuple[int, int, list[str], list[str]]:
    """Parameters, nodes, custom domains and one warning per custom op, subgraphs included."""
    local_functions = {(f.domain, f.name) for f in model.functions}
    custom: list[str] = []
    warnings: list[str] = []
    flagged: set[tuple[str, str]] = set()
    parameters = total_parameters(model.graph)  # as the Graph page's cost (params.py)
    nodes = 0
    for graph in _graphs(model.graph):
        for index, node in enumerate(graph.node):
            nodes += 1
            domain = node.domain
            if domain in KNOWN_DOMAINS or (domain, node.op_type) in local_functions:
                continue
            if domain not in custom:
                custom.append(domain)
            if (domain, node.op_type) not in flagged:
                flagged.add((domain, node.op_type))
                label = node.name or (node.output[0] if node.output else f"#{index}")
                warnings.append(
                    f"Node {label!r} uses op {node.op_type!r} from custom domain {domain!r} "
                    "that no runtime can run; the benchmark will fail unless a custom-op "
                    "library is registered."
                )
    return parameters, nodes, custom, warnings


def _attribute_tensors(attr: onnx.AttributeProto, where: str) -> Iterator[tuple[str, TensorProto]]:
    """Tensors held by one attribute, its sparse tensors and the graphs it carries."""
    here = f"{where}, attribute {attr.name!r}"
    if attr.HasField("t"):
        yield here, attr.t
    yield from ((here, t) for t in attr.tensors)
    sparse = ([attr.sparse_tensor] if attr.HasField("sparse_tensor") else []) + list(
        attr.sparse_tensors
    )
    for tensor in sparse:
        yield here, tensor.values
        yield here, tensor.indices
    graphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
    for graph in graphs:
        yield from _graph_tensors(graph, f"{here}, subgraph {graph.name!r}")


def _node_tensors(nodes: Iterable[onnx.NodeProto], where: str) -> Iterator[tuple[str, TensorProto]]:
    for index, node in enumerate(nodes):
        label = node.name or (node.output[0] if node.output else f"#{index}")
        for attr in node.attribute:
            yield from _attribute_tensors(attr, f"{where}, node {label!r}")


def _graph_tensors(graph: onnx.GraphProto, where: str) -> Iterator[tuple[str, TensorProto]]:
    for tensor in graph.initializer:
        yield f"{where}, initializer {tensor.name!r}", tensor
    for sparse in graph.sparse_initializer:
        shown = f"{where}, sparse initializer {sparse.values.name!r}"
        yield shown, sparse.values
        yield shown, sparse.indices
    yield from _node_tensors(graph.node, where)


def all_tensors(model: onnx.ModelProto) -> Iterator[tuple[str, TensorProto]]:
    """(where, tensor) for every tensor anywhere: graphs, subgraphs, sparse parts, attributes
    and the nodes of model-local functions."""
    yield from _graph_tensors(model.graph, "the main graph")
    for function in model.functions:
        yield from _node_tensors(function.node, f"function {function.name!r}")


def refers_to_external_data(tensor: TensorProto) -> bool:
    return tensor.data_location == TensorProto.EXTERNAL or len(tensor.external_data) > 0


def _location(tensor: TensorProto) -> str:
    return next((e.value for e in tensor.external_data if e.key == "location"), "")


def external_tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    """Every tensor anywhere in the model that is stored as external data."""
    return [t for _where, t in all_tensors(model) if refers_to_external_data(t)]


def external_data_files(model: onnx.ModelProto) -> list[str]:
    """Locations of external tensor data the model refers to, in first-use order.

    ONNX Runtime's in-memory address marker is no file and is left to `check_self_contained`.
    """
    found: list[str] = []
    for tensor in external_tensors(model):
        location = _location(tensor)
        if location and location != ORT_MEMORY_MARKER and location not in found:
            found.append(location)
    return found


def check_self_contained(model: onnx.ModelProto, shown: str, memory_only: bool = False) -> None:
    """Refuse a model in which any tensor still refers to data outside the stored file.

    Runs on the proto that will be stored, after external weights were taken in, so safety does
    not rest on which places a given onnx or ONNX Runtime version happens to resolve.
    `memory_only` refuses just ONNX Runtime's memory-address marker (before weights are read).
    """
    for where, tensor in all_tensors(model):
        if not refers_to_external_data(tensor):
            continue
        if _location(tensor) == ORT_MEMORY_MARKER:
            raise UserError(
                f"The model {shown!r} has a tensor ({where}) that points at a memory address "
                f"(ONNX Runtime's {ORT_MEMORY_MARKER!r} marker), which an upload cannot carry; "
                "re-save the model with its weights inside the file and upload it again."
            )
        if memory_only:
            continue
        raise UserError(
            f"The model {shown!r} has a tensor ({where}) that still refers to external data "
            f"{_location(tensor) or '(no location)'!r} that could not be taken into the stored "
            "file; re-save the model with all weights inline (onnx.save with "
            "save_as_external_data=False) and upload it again."
        )
