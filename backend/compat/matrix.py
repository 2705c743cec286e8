"""The operator-compatibility matrix: every node against every backend, with the reason why.

Sources, best first, and each cell names the one it used:
1. the installed ONNX Runtime's kernel registry (op, domain, version range, element types);
2. the versioned support lists in backend/compat/data for backends not installed here;
3. real placement from a session on each available provider, shown beside the prediction.
"""

from __future__ import annotations

import csv
import importlib.metadata
import io
import json
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx

from backend.compat import datafiles
from backend.compat.facts import (
    NodeFacts,
    expand_function,
    function_body,
    infer,
    load_model,
    node_protos,
    read_nodes,
    short_type,
    value_types,
)
from backend.compat.placement import Placement, read_placement
from backend.compat.registry import Kernel, KernelRegistry, load_registry
from backend.reporting.csvsafe import safe_frame

SUPPORTED, PARTIAL, UNSUPPORTED, UNKNOWN = "supported", "partial", "unsupported", "unknown"
STATUSES = (SUPPORTED, PARTIAL, UNSUPPORTED, UNKNOWN)
MATRIX_VERSION = "compat-1"

CPU, CUDA, TRT_EP, TRT, OPENVINO, TFTRT = (
    "ort-cpu",
    "ort-cuda",
    "ort-tensorrt",
    "tensorrt",
    "openvino",
    "tf-trt",
)
BACKEND_LABELS = {
    CPU: "ONNX Runtime CPU",
    CUDA: "ONNX Runtime CUDA",
    TRT_EP: "ONNX Runtime TensorRT EP",
    TRT: "TensorRT",
    OPENVINO: "OpenVINO",
    TFTRT: "TF-TRT",
}
ORT_PROVIDER = {CPU: "CPUExecutionProvider", CUDA: "CUDAExecutionProvider"}
PLACEMENT_PROVIDER = {CPU: "cpu", CUDA: "cuda", TRT_EP: "tensorrt"}
ONNX_DOMAINS = {"", "ai.onnx.ml", "ai.onnx.preview.training"}


@dataclass(frozen=True)
class CompatCell:
    """One node on one backend: status, a one-line reason, where the answer came from."""

    status: str
    reason: str
    source: str
    fix: str | None = None  # a concrete suggestion where a known fix exists


@dataclass(frozen=True)
class BackendSummary:
    backend: str
    label: str
    applicable: bool
    nodes: int
    supported: int
    partial: int
    unsupported: int
    unknown: int
    fallbacks: int  # nodes another provider runs instead (predicted, or real where placed)
    share: float  # (supported + partial) / nodes
    suggestions: list[str]
    placement: dict[str, Any] | None = None  # real placement: counts or the session's error
    note: str = ""


@dataclass
class CompatMatrix:
    model_format: str
    nodes: list[NodeFacts]
    backends: list[str]
    cells: dict[str, list[CompatCell]]  # backend -> one cell per node, in node order
    placements: dict[str, Placement] = field(default_factory=dict)
    runtime: str = ""
    sources: list[dict[str, str]] = field(default_factory=list)
    fingerprint: str = ""
    notes: dict[str, str] = field(default_factory=dict)  # backend -> why it is not applicable

    def cell(self, backend: str, index: int) -> CompatCell:
        return self.cells[backend][index]

    def placed_on(self, backend: str, node: NodeFacts) -> str | None:
        placement = self.placements.get(backend)
        if placement is None or not placement.ok:
            return None
        return placement.nodes.get(node.name)

    def to_frame(self) -> Any:
        """One row per node x backend, for tables, filters and exports."""
        import pandas as pd

        rows = []
        for backend in self.backends:
            for node in self.nodes:
                c = self.cells[backend][node.index]
                placement = self.placements.get(backend)
                rows.append(
                    {
                        "node": node.name,
                        "index": node.index,
                        "op_type": node.op_type,
                        "domain": node.domain_label,
                        "op_version": node.op_version,
                        "opset": node.opset,
                        "input_types": ", ".join(short_type(t) for t in node.input_types),
                        "output_types": ", ".join(short_type(t) for t in node.output_types),
                        "graph": node.graph,
                        "backend": backend,
                        "backend_label": BACKEND_LABELS[backend],
                        "status": c.status,
                        "reason": c.reason,
                        "source": c.source,
                        "fix": c.fix or "",
                        "placed_on": self.placed_on(backend, node) or "",
                        "placement_error": (placement.error or "") if placement else "",
                    }
                )
        return pd.DataFrame(rows)

    def summary(self) -> list[BackendSummary]:
        """Per backend: how many nodes it runs, what falls back, and the known fixes."""
        out = []
        for backend in (*self.backends, *[b for b in self.notes if b not in self.backends]):
            if backend not in self.backends:
                out.append(
                    BackendSummary(
                        backend,
                        BACKEND_LABELS[backend],
                        False,
                        len(self.nodes),
                        0,
                        0,
                        0,
                        0,
                        0,
                        0.0,
                        [],
                        None,
                        self.notes[backend],
                    )
                )
                continue
            cells = self.cells[backend]
            counts = Counter(c.status for c in cells)
            fixes = Counter(c.fix for c in cells if c.fix)
            suggestions = [f"{fix} ({n} node{'s' if n != 1 else ''})" for fix, n in fixes.items()]
            placement = self.placements.get(backend)
            placement_info = None
            fallbacks = 0
            if backend in (CUDA, TRT_EP):
                fallbacks = counts[UNSUPPORTED]
            if placement is not None:
                placement_info = placement.to_dict()
                if placement.ok:
                    fallbacks = len(placement.fallbacks())
            n = len(cells)
            out.append(
                BackendSummary(
                    backend=backend,
                    label=BACKEND_LABELS[backend],
                    applicable=True,
                    nodes=n,
                    supported=counts[SUPPORTED],
                    partial=counts[PARTIAL],
                    unsupported=counts[UNSUPPORTED],
                    unknown=counts[UNKNOWN],
                    fallbacks=fallbacks,
                    share=(counts[SUPPORTED] + counts[PARTIAL]) / n if n else 1.0,
                    suggestions=suggestions,
                    placement=placement_info,
                    note=self.notes.get(backend, ""),
                )
            )
        return out

    def op_frame(self) -> Any:
        """Ops x backends with node counts and the worst status, for the heat map."""
        frame = self.to_frame()
        if frame.empty:
            return frame
        rank = {SUPPORTED: 0, UNKNOWN: 1, PARTIAL: 2, UNSUPPORTED: 3}
        frame["rank"] = frame["status"].map(rank)
        frame["op"] = frame.apply(
            lambda r: (
                r["op_type"] if r["domain"] == "ai.onnx" else f"{r['domain']}::{r['op_type']}"
            ),
            axis=1,
        )
        grouped = frame.groupby(["op", "backend"], sort=False).agg(
            nodes=("node", "count"),
            rank=("rank", "max"),
            unsupported=("status", lambda s: int((s == UNSUPPORTED).sum())),
        )
        grouped = grouped.reset_index()
        inverse = {v: k for k, v in rank.items()}
        grouped["status"] = grouped["rank"].map(inverse)
        return grouped.drop(columns=["rank"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": MATRIX_VERSION,
            "model_format": self.model_format,
            "runtime": self.runtime,
            "fingerprint": self.fingerprint,
            "sources": self.sources,
            "notes": self.notes,
            "backends": self.backends,
            "nodes": [asdict(n) for n in self.nodes],
            "cells": {b: [asdict(c) for c in cs] for b, cs in self.cells.items()},
            "placements": {b: p.to_dict() for b, p in self.placements.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompatMatrix:
        nodes = []
        for n in data["nodes"]:
            for key in ("input_types", "output_types", "input_is_initializer", "attributes"):
                n[key] = tuple(n[key])
            nodes.append(NodeFacts(**n))
        return cls(
            model_format=data["model_format"],
            nodes=nodes,
            backends=data["backends"],
            cells={b: [CompatCell(**c) for c in cs] for b, cs in data["cells"].items()},
            placements={b: Placement.from_dict(p) for b, p in data["placements"].items()},
            runtime=data["runtime"],
            sources=data["sources"],
            fingerprint=data["fingerprint"],
            notes=data.get("notes", {}),
        )

    def to_json(self) -> str:
        """The matrix as one JSON document: nodes, cells per backend, placements, sources."""
        payload = self.to_dict()
        payload["summary"] = [asdict(s) for s in self.summary()]
        return json.dumps(payload, indent=1)

    def to_csv(self) -> str:
        frame = safe_frame(self.to_frame())
        buffer = io.StringIO()
        frame.to_csv(buffer, index=False, quoting=csv.QUOTE_MINIMAL)
        return buffer.getvalue()


# ---- ONNX Runtime: kernel matching ------------------------------------------------------------


def _kernels_from_list(support: datafiles.SupportList, op: str, provider: str) -> list[Kernel]:
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


def match_kernels(node: NodeFacts, kernels: list[Kernel], where: str, source: str) -> CompatCell:
    """Match op version and element types against kernels, not just the op name."""
    if not kernels:
        return CompatCell(UNSUPPORTED, f"no {where} kernel for {node.op_type}", source)
    version = node.op_version
    if version is None:
        return CompatCell(
            UNKNOWN, f"the model's opset does not define {node.op_type}; version unresolved", source
        )
    in_range = [k for k in kernels if k.covers(version)]
    if not in_range:
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
        return CompatCell(
            UNSUPPORTED,
            f"no {where} kernel for {node.op_type}-{version} (kernels: {ranges}); {hint}".rstrip(
                "; "
            ),
            source,
            fix,
        )
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

    def __init__(self, provider: str, where: str, kernels_for: Any, source: str) -> None:
        self.provider = provider
        self.where = where
        self.kernels_for = kernels_for  # (domain, op) -> list[Kernel]
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
            f"({len(body.node)} ops, all with {self.where} kernels)",
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


# ---- data-file backends -----------------------------------------------------------------------

TRT_DOUBLE = "tensor(double)"


def tensorrt_cell(node: NodeFacts, support: datafiles.SupportList, ep: bool) -> CompatCell:
    """Native TensorRT, or ORT's TensorRT EP (which hands rejected nodes to CUDA/CPU)."""
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
    main = node.main_type
    allowed = entry.get("types") or []
    if allowed and main.startswith("tensor(") and short_type(main) not in allowed:
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
    if entry.get("restrictions"):
        return CompatCell(PARTIAL, entry["restrictions"].split(". ")[0].rstrip("."), source)
    return CompatCell(SUPPORTED, f"TensorRT importer for {node.op_type}", source)


def openvino_cell(node: NodeFacts, support: datafiles.SupportList) -> CompatCell:
    source = f"list: {support.label}"
    entry = support.entry(node.domain, node.op_type)
    if entry is None:
        if support.covers_domain(node.domain) and support.complete:
            return CompatCell(
                UNSUPPORTED, f"{node.op_type} is not in OpenVINO's ONNX frontend list", source
            )
        return CompatCell(UNKNOWN, f"{node.domain_label} ops are not in OpenVINO's list", source)
    versions = entry["versions"]
    if not versions:
        return CompatCell(
            UNSUPPORTED, f"OpenVINO's ONNX frontend has no translator for {node.op_type}", source
        )
    version = node.op_version
    if version is not None and min(versions) > version:
        return CompatCell(
            UNSUPPORTED,
            f"OpenVINO translates {node.op_type} from version {min(versions)}; "
            f"this node is version {version}",
            source,
            f"change opset: convert the model to opset {min(versions)} or later",
        )
    if entry.get("limitation"):
        return CompatCell(PARTIAL, entry["limitation"], source)
    usable = max((v for v in versions if version is None or v <= version), default=min(versions))
    return CompatCell(
        SUPPORTED, f"OpenVINO translator for {node.op_type} (version {usable})", source
    )


# ---- building ---------------------------------------------------------------------------------


def _custom_domain(node: NodeFacts, registry: KernelRegistry) -> bool:
    return (
        node.domain not in ONNX_DOMAINS
        and node.domain not in registry.domains
        and node.domain
        not in {
            "com.microsoft",
            "com.microsoft.nchwc",
            "org.openvinotoolkit",
        }
    )


def _custom_cell(node: NodeFacts) -> CompatCell:
    return CompatCell(
        UNSUPPORTED,
        f"custom domain '{node.domain}': no backend has a kernel; register a custom-op library",
        "domain",
        f"register a custom-op library for '{node.domain}'",
    )


def runtime_label(registry: KernelRegistry | None = None) -> str:
    try:
        onnx_version = importlib.metadata.version("onnx")
    except importlib.metadata.PackageNotFoundError:
        onnx_version = "?"
    ort = registry.runtime if registry else "onnxruntime ?"
    return f"{ort}; onnx {onnx_version}"


def fingerprint(registry: KernelRegistry, with_placement: bool) -> str:
    """Runtime versions + data-file versions: a change in either expires cached matrices."""
    runtime = runtime_label(registry)
    return f"{MATRIX_VERSION}|{runtime}|{datafiles.fingerprint()}|placement={int(with_placement)}"


def predict_cpu(
    node: NodeFacts,
    registry: KernelRegistry,
    proto: onnx.NodeProto | None = None,
    types: dict[str, onnx.TypeProto] | None = None,
) -> CompatCell:
    """The CPU column alone (used by the ground-truth bench)."""
    return _cpu_predictor(registry).predict(node, proto, types)


def _cpu_predictor(registry: KernelRegistry) -> OrtPredictor:
    source = f"registry: {registry.runtime}"
    return OrtPredictor(
        "CPUExecutionProvider",
        "CPU",
        lambda d, op: registry.lookup("CPUExecutionProvider", d, op),
        source,
    )


def _cuda_predictor(registry: KernelRegistry) -> tuple[OrtPredictor, datafiles.SupportList | None]:
    if "CUDAExecutionProvider" in registry.providers:
        return (
            OrtPredictor(
                "CUDAExecutionProvider",
                "CUDA",
                lambda d, op: registry.lookup("CUDAExecutionProvider", d, op),
                f"registry: {registry.runtime}",
            ),
            None,
        )
    support = datafiles.load("ort-cuda")
    return (
        OrtPredictor(
            "CUDAExecutionProvider",
            "CUDA",
            lambda d, op: (
                _kernels_from_list(support, op, "CUDAExecutionProvider") if d == "" else []
            ),
            f"list: {support.label}",
        ),
        support,
    )


def _cells_from_placement(
    nodes: list[NodeFacts], predicted: list[CompatCell], placement: Placement, why: str
) -> list[CompatCell]:
    """Without a readable registry, a real CPU session is the next-best source for the column.

    Seen on an H200 host whose onnxruntime-gpu lacked TensorRT: the registry dump segfaults while
    loading the TensorRT provider, yet sessions open fine.
    """
    cells = []
    for node, cell in zip(nodes, predicted, strict=True):
        if cell.status == UNKNOWN and placement.nodes.get(node.name) == placement.requested:
            cell = CompatCell(
                SUPPORTED,
                f"a real CPU session ran it (kernel registry unreadable: {why.splitlines()[0]})",
                "placement",
            )
        cells.append(cell)
    return cells


def build_matrix(
    model_path: Path, model_format: str = "onnx", with_placement: bool = True
) -> CompatMatrix:
    """Every node of the model against every backend; placement from real sessions if asked."""
    model = load_model(Path(model_path))
    nodes = read_nodes(model)
    protos = node_protos(model)
    types = value_types(model)
    registry = load_registry()
    cpu = _cpu_predictor(registry)
    cuda, cuda_list = _cuda_predictor(registry)
    trt_list = datafiles.load("tensorrt")
    ov_list = datafiles.load("openvino")
    backends = [CPU, CUDA, TRT_EP, TRT, OPENVINO]
    notes: dict[str, str] = {}
    if model_format == "savedmodel":
        backends.append(TFTRT)
    else:
        notes[TFTRT] = "not applicable: TF-TRT applies to SavedModel uploads only"
    cells: dict[str, list[CompatCell]] = {b: [] for b in backends}
    for node, proto in zip(nodes, protos, strict=True):
        if _custom_domain(node, registry):
            for b in backends:
                cells[b].append(_custom_cell(node))
            continue
        if registry.error:
            cpu_cell = CompatCell(
                UNKNOWN, f"kernel registry unreadable: {registry.error}", "registry"
            )
        else:
            cpu_cell = cpu.predict(node, proto, types)
        cells[CPU].append(cpu_cell)
        if cuda_list is not None and node.domain != "" and not cuda_list.covers_domain(node.domain):
            cuda_cell = CompatCell(
                UNKNOWN,
                f"{node.domain_label} ops are not in the transcribed CUDA kernel list",
                f"list: {cuda_list.label}",
            )
        else:
            cuda_cell = cuda.predict(node, proto, types)
        if cuda_cell.status == UNSUPPORTED and cpu_cell.status == SUPPORTED:
            cuda_cell = CompatCell(
                UNSUPPORTED,
                f"{cuda_cell.reason}; runs on CPU: falls back",
                cuda_cell.source,
                cuda_cell.fix,
            )
        cells[CUDA].append(cuda_cell)
        ep_cell = tensorrt_cell(node, trt_list, ep=True)
        cells[TRT_EP].append(ep_cell)
        cells[TRT].append(tensorrt_cell(node, trt_list, ep=False))
        cells[OPENVINO].append(openvino_cell(node, ov_list))
        if TFTRT in cells:
            cells[TFTRT].append(
                CompatCell(
                    UNKNOWN,
                    "TF-TRT converts TensorFlow ops, not ONNX nodes; "
                    "segments it cannot convert stay in TensorFlow",
                    "not assessed",
                )
            )
    placements: dict[str, Placement] = {}
    if with_placement:
        placements = real_placements(Path(model_path))
    if registry.error and CPU in placements and placements[CPU].ok:
        cells[CPU] = _cells_from_placement(nodes, cells[CPU], placements[CPU], registry.error)
    sources = [
        {
            "backend": b,
            "title": s.title,
            "release": s.release,
            "source": s.source,
            "retrieved": s.retrieved,
        }
        for b, s in ((CUDA, cuda_list), (TRT, trt_list), (OPENVINO, ov_list))
        if s is not None
    ]
    sources.insert(
        0,
        {
            "backend": CPU,
            "title": "installed kernel registry",
            "release": registry.runtime,
            "source": "onnxruntime get_all_opkernel_def()",
            "retrieved": "at build time",
        },
    )
    return CompatMatrix(
        model_format=model_format,
        nodes=nodes,
        backends=backends,
        cells=cells,
        placements=placements,
        runtime=runtime_label(registry),
        sources=sources,
        fingerprint=fingerprint(registry, with_placement),
        notes=notes,
    )


def real_placements(model_path: Path) -> dict[str, Placement]:
    """A real session per available ORT provider; providers not usable here are skipped."""
    from backend.runtimes.onnxruntime import detect_providers

    available = {s.name for s in detect_providers() if s.available}
    out = {}
    for backend, short in PLACEMENT_PROVIDER.items():
        if short in available:
            out[backend] = read_placement(model_path, short)
    return out


def matrix_for_model(model_id: int, refresh: bool = False) -> CompatMatrix:
    """The matrix of a library model, cached per model sha256 and runtime/data-file versions."""
    from backend.models import library
    from storage.repo import caches as compat_cache

    model = library.get_model(model_id)
    path = library.onnx_path(model_id)
    registry = load_registry()
    key = fingerprint(registry, with_placement=True)
    if not refresh:
        cached = compat_cache.get_compat(model.sha256, key)
        if cached is not None and cached.get("version") == MATRIX_VERSION:
            return CompatMatrix.from_dict(cached)
    matrix = build_matrix_in_child(path, model.format)
    compat_cache.put_compat(model.sha256, key, matrix.to_dict())
    return matrix


def build_matrix_in_child(
    model_path: Path, model_format: str = "onnx", timeout: float = 900.0
) -> CompatMatrix:
    """build_matrix in a child process: onnx's C++ function builders can crash on odd models,
    and that must not take the dashboard or the worker down."""
    from backend.queue.children import run_module

    stdout = run_module(
        "backend.compat.matrix",
        str(model_path),
        model_format,
        timeout_s=timeout,
        what="building the compatibility matrix",
    )
    return CompatMatrix.from_dict(json.loads(stdout))


if __name__ == "__main__":
    import sys

    built = build_matrix(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "onnx")
    sys.stdout.write(json.dumps(built.to_dict()))
