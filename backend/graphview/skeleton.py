"""A structure-only copy of a large .onnx, for the viewer: the graph without its weights' bytes.

An upload keeps its weights inside the .onnx (ingest internalises external data, up to
protobuf's 2 GB), so a model past the viewer's limit (settings.VIEWER_MAX_MB) is too big to hand
to a browser tab. The copy keeps every node, attribute, tensor name, type and shape; each tensor
over KEEP_BYTES (initializers, Constant values, sparse tensors, in subgraphs too) loses its data,
dims kept, and any external-data reference is dropped with it, so the pinned Netron shows its
type and shape and says 'Tensor data is empty.' for its values, and requests no file. Node names
are unchanged, so overlays match the copy as they match the upload.

The copy is made in a limited child (the upload is parsed there, never in the web process) and
cached per artifact digest where backend/models/derived.py says (so deleting the model removes
it), so a second view only opens a file.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.models import derived

# Tensors this small (shape vectors, axes, scalars) keep their values: they are not weights and
# Netron shows them inline, e.g. a Reshape's target shape.
KEEP_BYTES = 1024
NAME = "skeleton.onnx"


@dataclass(frozen=True)
class Skeleton:
    path: Path
    size_bytes: int
    cached: bool  # True when an earlier view made it
    made_by: int = 0  # the pid of the child that made it (0 when read from the cache)


def skeleton_of(source: Path, sha256: str) -> Skeleton:
    """The structure-only copy of the .onnx at `source` (whose content digest is `sha256`),
    made in a limited child on the first call and read from the cache afterwards."""
    final = derived.skeleton_path(sha256)
    if final.is_file():
        return Skeleton(final, final.stat().st_size, cached=True)
    from backend.launch.children import run_parse

    source = Path(source).resolve()
    final.parent.mkdir(parents=True, exist_ok=True)
    # Sessions are threads of one web process: each view writes its own partial file.
    partial = final.with_name(f"{final.name}.{uuid.uuid4().hex}.partial")
    try:
        made = run_parse(
            "backend.graphview.skeleton:child_skeleton",
            str(source),
            what=f"Making a weightless copy of {source.name!r} for the viewer",
            read_only=[source],
            outputs={NAME: partial},
        )
        os.replace(partial, final)  # whole or absent: a concurrent view sees one or the other
    finally:
        partial.unlink(missing_ok=True)
    return Skeleton(final, final.stat().st_size, cached=False, made_by=int(made["pid"]))


# ---- child side -------------------------------------------------------------------------------


def child_skeleton(path: str) -> dict[str, int]:
    """Load the graph (external data never read), strip the weights, save NAME in the cwd."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    stripped = strip_weights(model)
    onnx.save(model, NAME)
    return {"stripped": stripped, "pid": os.getpid()}


def strip_weights(model: Any) -> int:
    """Drop the data of every tensor over KEEP_BYTES in `model` (in place); how many were."""
    stripped = 0
    tensors: list[Any] = []
    queue = [model.graph]
    for function in model.functions:
        for node in function.node:
            queue += _node_graphs(node, tensors)
    while queue:
        graph = queue.pop()
        tensors += list(graph.initializer)
        for sparse in graph.sparse_initializer:
            tensors += [sparse.values, sparse.indices]
        for node in graph.node:
            queue += _node_graphs(node, tensors)
    for tensor in tensors:
        stripped += _strip(tensor)
    return stripped


def _node_graphs(node: Any, tensors: list[Any]) -> list[Any]:
    """The subgraphs of `node`'s attributes; its tensor attributes are appended to `tensors`."""
    graphs = []
    for attribute in node.attribute:
        if attribute.HasField("g"):
            graphs.append(attribute.g)
        graphs += list(attribute.graphs)
        if attribute.HasField("t"):
            tensors.append(attribute.t)
        tensors += list(attribute.tensors)
        if attribute.HasField("sparse_tensor"):
            tensors += [attribute.sparse_tensor.values, attribute.sparse_tensor.indices]
        for sparse in attribute.sparse_tensors:
            tensors += [sparse.values, sparse.indices]
    return graphs


_DATA_FIELDS = (
    "raw_data",
    "float_data",
    "int32_data",
    "string_data",
    "int64_data",
    "double_data",
    "uint64_data",
)


def _strip(tensor: Any) -> bool:
    """Clear one tensor's data past KEEP_BYTES, keeping name, type and dims; True if it was."""
    from onnx import TensorProto

    external = tensor.data_location == TensorProto.EXTERNAL
    if not external and tensor.ByteSize() <= KEEP_BYTES:
        return False
    for field in _DATA_FIELDS:
        tensor.ClearField(field)
    tensor.ClearField("external_data")
    tensor.data_location = TensorProto.DEFAULT
    return True
