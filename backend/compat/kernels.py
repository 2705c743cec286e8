"""ONNX Runtime kernel matching: op version ranges and element-type constraints, not op names.

Used by the ONNX Runtime columns, with kernels from the installed runtime's registry or from a
transcribed support list when the provider is not installed here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import onnx

from backend.compat import datafiles
from backend.compat.cells import PARTIAL, SUPPORTED, UNKNOWN, UNSUPPORTED, CompatCell
from backend.compat.facts import (
    NodeFacts,
    expand_function,
    function_body,
    infer,
    node_protos,
    read_nodes,
    short_type,
    value_types,
)
from backend.compat.registry import Kernel
from backend.counts import counted

KernelLookup = Callable[[str, str], list[Kernel]]  # (domain, op) -> kernels


def kernels_from_list(support: datafiles.SupportList, op: str, provider: str) -> list[Kernel]:
    """A transcribed list's kernels for one standard-domain op, as registry Kernels."""
    entry = support.entry("", op)
    if not entry:
        return []
    return [Kernel(op, "", k["since"], k["until"], provider, k["types"]) for k in entry["kernels"]]


def _missing_types(node: NodeFacts, kernels: list[Kernel]) -> list[str]:
    union: dict[str, set[str]] = {}
    for k in kernels:
        for param, types in k.types.items():
            union.setdefault(param, set()).update(types)
    missing = []
    for param, types in node.type_bindings.items():
        for t in types:
            if param in union and t not in union[param] and t not in missing:
                missing.append(t)
    return missing


def _kernel_fits(node: NodeFacts, kernel: Kernel) -> bool:
    for param, types in node.type_bindings.items():
        allowed = kernel.types.get(param)
        if allowed is not None and any(t not in allowed for t in types):
            return False
    return True


def _out_of_range(node: NodeFacts, kernels: list[Kernel], where: str, source: str) -> CompatCell:
    """No kernel covers the node's op version: say which ranges exist and which opset fixes it."""
    version = node.op_version
    assert version is not None
    ranges = ", ".join(
        sorted({k.range_label for k in kernels}, key=lambda r: int(r.split("-")[0].rstrip("+")))
    )
    ceilings = [k.until for k in kernels if k.until is not None and k.until < version]
    floors = [k.since for k in kernels if k.since > version]
    if ceilings and not floors:
        hint = f"needs opset <= {max(ceilings)} here"
        fix = f"change opset: convert {node.op_type} to opset {max(ceilings)}"
    elif floors:
        hint = f"needs opset >= {min(floors)} here"
        fix = f"change opset: convert the model to opset {min(floors)} or later"
    else:
        hint, fix = "", None
    reason = f"no {where} kernel for {node.op_type}-{version} (kernels: {ranges}); {hint}"
    return CompatCell(UNSUPPORTED, reason.rstrip("; "), source, fix)


def match_kernels(node: NodeFacts, kernels: list[Kernel], where: str, source: str) -> CompatCell:
    """Match op version and element types against kernels, not just the op name."""
    if not kernels:
        return CompatCell(UNSUPPORTED, f"no {where} kernel for {node.op_type}", source)
    version = node.op_version
    if version is None and node.opset is not None:
        # no ONNX schema: an op ONNX Runtime defines itself (SimplifiedLayerNormalization in the
        # default domain); its own schema resolves to the newest kernel version <= the opset
        sinces = [k.since for k in kernels if k.since <= node.opset]
        own = [k for k in kernels if sinces and k.covers(max(sinces))]
        typed = [k for k in own if any(node.main_type in ts for ts in k.types.values())]
        if typed or (own and node.main_type == "?"):
            return CompatCell(
                SUPPORTED,
                f"{where} kernel {node.op_type} {(typed or own)[0].range_label} (ONNX Runtime's "
                f"own op, resolved by the model's opset {node.opset})",
                source,
            )
    if version is None:
        return CompatCell(
            UNKNOWN, f"the model's opset does not define {node.op_type}; version unresolved", source
        )
    in_range = [k for k in kernels if k.covers(version)]
    if not in_range:
        return _out_of_range(node, kernels, where, source)
    fitting = [k for k in in_range if _kernel_fits(node, k)]
    if fitting:
        unknown = "?" in (*node.input_types, *node.output_types) and not node.type_bindings
        note = "; element types unknown, version matched only" if unknown else ""
        return CompatCell(
            SUPPORTED, f"{where} kernel {node.op_type} {fitting[0].range_label}{note}", source
        )
    missing = _missing_types(node, in_range)
    if missing:
        names = "/".join(short_type(t) for t in missing)
        fix = (
            f"keep {node.op_type} in FP32 (cast around it)"
            if any(t in ("tensor(float16)", "tensor(bfloat16)") for t in missing)
            else f"cast {node.op_type}'s {names} input to a supported type"
        )
        return CompatCell(
            UNSUPPORTED, f"no {names} kernel for {node.op_type} on {where}", source, fix
        )
    combo = ", ".join(
        f"{p}={'/'.join(short_type(t) for t in ts)}" for p, ts in node.type_bindings.items()
    )
    return CompatCell(UNSUPPORTED, f"no {where} kernel for the type combination {combo}", source)


class OrtPredictor:
    """Predicts ONNX Runtime's kernel assignment for one provider.

    Besides kernel matching it models two things ORT does before giving up on a node: it
    inlines the op's ONNX function body when no kernel takes the node, and on CPU it wraps a
    float16 node that has only a float kernel in Casts (InsertCastTransformer).
    """

    def __init__(self, provider: str, where: str, kernels_for: KernelLookup, source: str) -> None:
        self.provider = provider
        self.where = where
        self.kernels_for = kernels_for
        self.source = source

    def predict(
        self,
        node: NodeFacts,
        proto: onnx.NodeProto | None = None,
        types: dict[str, onnx.TypeProto] | None = None,
        depth: int = 0,
    ) -> CompatCell:
        if node.domain == "" and node.op_type == "Constant":
            return CompatCell(
                SUPPORTED, "folded into an initializer when the session loads", self.source
            )
        kernels = self.kernels_for(node.domain, node.op_type)
        cell = match_kernels(node, kernels, self.where, self.source)
        if cell.status == SUPPORTED:
            return cell
        if self.provider == "CPUExecutionProvider":
            cast = self._fp16_cast(node, kernels)
            if cast is not None:
                return cast
        if proto is None or not node.has_function or depth > 4:
            return cell
        return self._inlined(node, proto, types, depth, cell)

    def _inlined(
        self,
        node: NodeFacts,
        proto: onnx.NodeProto,
        types: dict[str, onnx.TypeProto] | None,
        depth: int,
        cell: CompatCell,
    ) -> CompatCell:
        """No kernel took the node: ORT inlines its ONNX function if every inner op has one."""
        body = function_body(proto, node, types)
        if body is None:
            return cell
        expanded = infer(expand_function(proto, node, body, types))
        inner_types = value_types(expanded)
        inner_facts = read_nodes(expanded)
        for inner, inner_proto in zip(inner_facts, node_protos(expanded), strict=False):
            inner_cell = self.predict(inner, inner_proto, inner_types, depth + 1)
            if inner_cell.status not in (SUPPORTED, PARTIAL):
                return CompatCell(
                    UNSUPPORTED,
                    f"{cell.reason}; its ONNX function needs {inner.op_type}: {inner_cell.reason}",
                    self.source,
                    cell.fix,
                )
        return CompatCell(
            SUPPORTED,
            f"no {self.where} kernel matches; ONNX Runtime inlines its ONNX function "
            f"({counted(len(body.node), 'op')}, all with {self.where} kernels)",
            self.source,
        )

    def _fp16_cast(self, node: NodeFacts, kernels: list[Kernel]) -> CompatCell | None:
        """A float16 node whose float32 twin has a CPU kernel: ORT casts around it."""
        if not any("tensor(float16)" in ts for ts in node.type_bindings.values()):
            return None
        as_float = {
            p: ["tensor(float)" if t == "tensor(float16)" else t for t in ts]
            for p, ts in node.type_bindings.items()
        }
        twin = replace(node, type_bindings=as_float)
        if match_kernels(twin, kernels, self.where, self.source).status != SUPPORTED:
            return None
        return CompatCell(
            PARTIAL,
            f"no float16 kernel for {node.op_type}; ONNX Runtime casts it to float32 and back",
            self.source,
            f"run {node.op_type} on a GPU provider, or keep it in FP32 to avoid the casts",
        )
