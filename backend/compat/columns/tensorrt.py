"""Native TensorRT, predicted from the transcribed TensorRT ONNX-parser support matrix."""

from __future__ import annotations

import onnx

from backend.compat import datafiles
from backend.compat.cells import PARTIAL, SUPPORTED, UNKNOWN, UNSUPPORTED, CompatCell
from backend.compat.columns.base import CompatColumn, ModelContext, list_source
from backend.compat.columns.trtconditions import Judged, judge, sentences
from backend.compat.facts import NodeFacts, short_type

TRT_DOUBLE = "tensor(double)"


def _type_cell(
    node: NodeFacts, allowed: list[str], source: str, fallback: str
) -> CompatCell | None:
    """The node's main element type against the importer's list; None when it is allowed."""
    main = node.main_type
    if not allowed or not main.startswith("tensor(") or short_type(main) in allowed:
        return None
    if main == TRT_DOUBLE:
        return CompatCell(
            PARTIAL,
            "double is cast down to float (values clamped to +-FLT_MAX)",
            source,
            "convert double tensors to float32",
        )
    fix = "cast int64 to int32" if main == "tensor(int64)" else None
    return CompatCell(
        UNSUPPORTED,
        f"no {short_type(main)} support for {node.op_type} in TensorRT{fallback}",
        source,
        fix,
    )


def conditions_cell(
    node: NodeFacts, restrictions: str, judged: Judged, source: str, fallback: str
) -> CompatCell:
    """The list's conditions as this node meets them: every one met is supported, one not met
    unsupported, the rest partial naming what is met and what is not known here."""
    if not judged.checked:
        return CompatCell(PARTIAL, sentences(restrictions)[0], source)
    if judged.unmet:
        unmet = "; ".join(judged.unmet)
        return CompatCell(
            UNSUPPORTED,
            f"TensorRT's {node.op_type} importer: not met here: {unmet}{fallback}",
            source,
        )
    met = f"met here: {'; '.join(judged.met)}" if judged.met else ""
    open_ = "; ".join(judged.unknown + judged.unchecked)
    if not open_:
        return CompatCell(SUPPORTED, f"TensorRT importer for {node.op_type}; {met}", source)
    return CompatCell(PARTIAL, "; ".join(p for p in (f"not known here: {open_}", met) if p), source)


def tensorrt_cell(
    node: NodeFacts,
    support: datafiles.SupportList,
    ep: bool,
    proto: onnx.NodeProto | None = None,
    types: dict[str, onnx.TypeProto] | None = None,
) -> CompatCell:
    """Native TensorRT, or ORT's TensorRT EP (which hands rejected nodes to CUDA/CPU); with the
    node's proto and the model's types, the list's conditions are checked where they can be."""
    source = f"list: {support.label}"
    first, last = support.extra.get("opset_range", [None, None])
    fallback = "; the TensorRT EP hands it to CUDA/CPU" if ep else ""
    if node.domain != "":
        return CompatCell(
            UNSUPPORTED,
            f"TensorRT parses standard ONNX ops only; {node.domain_label}::{node.op_type} needs a "
            f"TensorRT plugin{fallback}",
            source,
        )
    if node.opset is not None and first is not None and not first <= node.opset <= last:
        return CompatCell(
            UNSUPPORTED,
            f"{support.release} parses opset {first}-{last}; "
            f"this model is opset {node.opset}{fallback}",
            source,
            f"change opset: convert the model to opset {min(max(node.opset, first), last)}",
        )
    entry = support.entry("", node.op_type)
    if entry is None:
        if support.complete:
            return CompatCell(
                UNSUPPORTED,
                f"{node.op_type} is not in the TensorRT support matrix{fallback}",
                source,
            )
        return CompatCell(UNKNOWN, f"{node.op_type} is not in the list", source)
    if node.op_type == "Constant":
        entry = {**entry, "types": []}  # the constant's type is its attribute's; nothing to check
    if not entry["supported"]:
        fix = f"decompose {node.op_type} into its ONNX function body" if node.has_function else None
        note = f": {entry['restrictions']}" if entry.get("restrictions") else ""
        return CompatCell(
            UNSUPPORTED, f"TensorRT has no importer for {node.op_type}{note}{fallback}", source, fix
        )
    typed = _type_cell(node, entry.get("types") or [], source, fallback)
    if typed is not None:
        return typed
    if restrictions := entry.get("restrictions"):
        judged = judge(node, proto, types or {}, restrictions)
        return conditions_cell(node, restrictions, judged, source, fallback)
    return CompatCell(SUPPORTED, f"TensorRT importer for {node.op_type}", source)


class TensorRTColumn(CompatColumn):
    name = "tensorrt"
    label = "TensorRT"

    def cell(self, node: NodeFacts, context: ModelContext) -> CompatCell:
        support = datafiles.load("tensorrt")
        return tensorrt_cell(node, support, False, context.proto(node), context.types)

    def source(self, context: ModelContext) -> dict[str, str]:
        return list_source(self.name, datafiles.load("tensorrt"))
