"""Calibration for static INT8: feeds joined to the model's batch, the reader ORT pulls them from,
and the attention nodes that stay in float.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from backend.engine.inputs import fixed_batch, input_specs_of, specs_of_model
from backend.engine.npzfeeds import read_calibration_npz
from backend.errors import UserError
from backend.launch.children import run_parse
from backend.models.nodenames import node_name

QDQ = ("QuantizeLinear", "DequantizeLinear")


def input_batch(model: onnx.ModelProto) -> int | None:
    """The fixed batch of the model's inputs, or None when it is dynamic."""
    specs = specs_of_model(model)
    return fixed_batch(specs[0]["shape"]) if specs else None


def batched_feeds(
    feeds: list[dict[str, np.ndarray]], batch: int | None
) -> list[dict[str, np.ndarray]]:
    """Join batch-1 feeds into feeds of the model's fixed batch (cycling to fill the last one).

    Activation ranges are min/max over all elements, so concatenating samples gives the same
    calibration as feeding them one by one.
    """
    if batch is None or batch == 1 or not feeds:
        return feeds
    joined = []
    for start in range(0, len(feeds), batch):
        group = [feeds[(start + i) % len(feeds)] for i in range(batch)]
        joined.append({name: np.concatenate([g[name] for g in group]) for name in group[0]})
    return joined


class FeedReader:
    """Calibration feeds one by one; mixed with ORT's CalibrationDataReader when quantizing."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self.feeds = feeds
        self._iter: Iterator[dict[str, np.ndarray]] = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._iter, None)

    def rewind(self) -> None:
        self._iter = iter(self.feeds)


def keep_attention_in_float(path: Path) -> list[str]:
    """Names of the attention nodes to leave unquantized; unnamed nodes get names in place.

    Quantizing Q.K^T and the Softmax around it to 8 bits distorts attention weights badly
    (exp amplifies the rounding of the scores); on the test transformer it drops the cosine to
    FP32 from 0.9997 to 0.88, while Conv, Gemm and weight MatMuls lose almost nothing.
    """
    model = onnx.load(str(path))
    constants = {init.name for init in model.graph.initializer}
    constants |= {
        out for node in model.graph.node if node.op_type == "Constant" for out in node.output
    }
    used = {node.name for node in model.graph.node if node.name}
    excluded = []
    for index, node in enumerate(model.graph.node):
        if not node.name:
            name = node_name(node, index)
            while name in used:
                name += "_"
            node.name = name
            used.add(name)
        is_attention_matmul = node.op_type == "MatMul" and not (set(node.input) & constants)
        if node.op_type == "Softmax" or is_attention_matmul:
            excluded.append(node.name)
    onnx.save(model, str(path))
    return excluded


def _clip_like(model: onnx.ModelProto, q: onnx.NodeProto, reader: str) -> str:
    """A Clip of Q's float input to the range Q can represent: what Q->DQ does minus rounding.

    The quantizer folds a Relu (or Clip) into the Q that follows it, so the float tensor in front
    of Q may still be negative; clipping to Q's range restores that Relu exactly.
    """
    inits = {i.name: i for i in model.graph.initializer}
    scale = float(numpy_helper.to_array(inits[q.input[1]]).ravel()[0])
    zero_point = numpy_helper.to_array(inits[q.input[2]])
    info = np.iinfo(zero_point.dtype)
    zp = float(zero_point.ravel()[0])
    low, high = f"{reader}_{q.name}_low", f"{reader}_{q.name}_high"
    for name, value in ((low, (info.min - zp) * scale), (high, (info.max - zp) * scale)):
        model.graph.initializer.append(numpy_helper.from_array(np.float32(value), name))
    out = f"{q.input[0]}_clipped_for_{reader}"  # profile.KEPT_CLIP: profiles know it is ours
    model.graph.node.append(
        onnx.helper.make_node("Clip", [q.input[0], low, high], [out], name=f"{out}_Clip")
    )
    return out


def _bypass_input_qdq(model: onnx.ModelProto, names: set[str]) -> int:
    """Feed the named nodes, in place of each Q->DQ pair on their inputs, the float tensor in
    front of Q clipped to Q's range; drop Q/DQ nodes nobody reads; return how many were rewired.

    Excluding a node from quantize_static leaves Q->DQ on its inputs when a neighbour quantized
    them, and ONNX Runtime's level-'all' fusions then run the node in int8 all the same (seen:
    DQ -> Gemm with float weights -> Q became QGemm with re-quantized weights).
    """
    nodes = model.graph.node
    dq_of = {n.output[0]: n for n in nodes if n.op_type == "DequantizeLinear"}
    q_of = {n.output[0]: n for n in nodes if n.op_type == "QuantizeLinear"}
    rewired = 0
    for node in [n for n in nodes if n.name in names]:
        for index, tensor in enumerate(node.input):
            dq = dq_of.get(tensor)
            q = q_of.get(dq.input[0]) if dq is not None else None
            if q is not None and len(q.input) == 3:
                node.input[index] = _clip_like(model, q, node.name)
                rewired += 1
    outputs = {o.name for o in model.graph.output}
    while True:
        read = {t for n in nodes for t in n.input} | outputs
        dead = [n for n in nodes if n.op_type in QDQ and not set(n.output) & read]
        if not dead:
            break
        for node in dead:
            nodes.remove(node)
    if rewired:  # the appended Clips must come before their readers
        _sort_topologically(model)
    return rewired


def _sort_topologically(model: onnx.ModelProto) -> None:
    graph = model.graph
    ready = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending, ordered = list(graph.node), []
    while pending:
        runnable = [n for n in pending if all(t in ready for t in n.input)]
        if not runnable:
            raise ValueError("the graph has a cycle or a missing input after rewiring")
        for node in runnable:
            ordered.append(node)
            ready.update(node.output)
        pending = [n for n in pending if all(n is not r for r in runnable)]
    del graph.node[:]
    graph.node.extend(ordered)


def finish_kept_in_fp32(path: Path, excluded: list[str], bypass: list[str], key: str) -> None:
    """Make the `bypass` nodes truly float and note every excluded node in the model's metadata
    (under `key`), so a profile can tell "kept in FP32" from "no int8 kernel"."""
    if not excluded:
        return
    model = onnx.load(str(path))
    _bypass_input_qdq(model, set(bypass))
    entry = model.metadata_props.add()
    entry.key, entry.value = key, json.dumps(sorted(excluded))
    onnx.save(model, str(path))


def check_calibration(path: Path, model: Path, symbolic_dims: dict[str, int]) -> dict:
    """{'samples', 'notes'} of an uploaded calibration .npz checked against the model's inputs."""
    return check_npz_in_child(
        "backend.engine.calibration:child_check_calibration", path, model, symbolic_dims
    )


def check_npz_in_child(target: str, path: Path, model: Path, symbolic_dims: dict[str, int]) -> dict:
    """The JSON answer of `target` (a child_check_* function) on an uploaded .npz, checked
    against the inputs of the ONNX file `model`.

    numpy's reader is fed an untrusted file and the model's inputs are read from an upload (its
    protobuf, embedded weights and all), so both happen in one limited (sandboxed where
    bubblewrap works, else confined) child; the web process only sees the JSON answer or the
    child's one sentence. The calibration and evaluation uploads both come through here.
    """
    path, model = Path(path).resolve(), Path(model).resolve()
    return run_parse(
        target,
        str(path),
        str(model),
        dict(symbolic_dims),
        what=f"Checking the uploaded file {path.name!r}",
        read_only=[path, model],
    )


def child_check_calibration(path: str, model: str, symbolic_dims: dict) -> dict[str, Any]:
    """Child side of check_calibration: JSON in, JSON out."""
    specs = input_specs_of(Path(model))
    checked = read_calibration_npz(Path(path), specs, symbolic_dims)
    return {"samples": len(checked.feeds), "notes": checked.notes}


def nodes_kept_in_fp32(wanted: tuple[str, ...], prepared: Path) -> list[str]:
    """The nodes to keep in FP32 (mixed precision) as named in the prepared graph.

    A name matches itself or the node ORT's pre-processing fused it into ('dense/MatMulAddFusion').
    """
    names = [n.name for n in onnx.load(str(prepared), load_external_data=False).graph.node]
    found = {w: [n for n in names if n == w or n.startswith(f"{w}/")] for w in wanted}
    missing = [w for w, hits in found.items() if not hits]
    if missing:
        raise UserError(
            f"Node(s) {', '.join(missing[:5])} to keep in FP32 are not in this graph; pick names "
            "from the Graph page or the profile."
        )
    return sorted({n for hits in found.values() for n in hits})
