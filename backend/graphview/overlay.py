"""Overlays for the embedded Netron: one colour and one plain-text tooltip per node, and a legend.

Each overlay is computed here from data Optiboard already holds (a stored profile, the stored
layer-loss ranking, the compatibility matrix, the counted cost) against the graph's structure
(structure.py), and handed to the viewer as JSON (to_json). The viewer's patch
(backend/viewer_overlay.js) only paints: it sets each node's fill and tooltip with textContent,
so names from the model are always text.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from backend.compat.cells import CellStatus, CompatMatrix
from backend.counts import counted, scaled
from backend.engine.evidence import per_source_us
from backend.engine.fusion import LAYOUT_OPS, split_by_flops
from backend.engine.layerloss import NodeLoss
from backend.engine.profile import (
    CONVERSION_OPS,
    NodeProfile,
    Profile,
    SourceIndex,
    untraced_note,
)
from backend.graphview.structure import GraphStructure
from backend.models.cost import ModelCost
from backend.models.nodenames import MAIN

# kind -> what the Graph page's picker says; "" draws the plain graph
KINDS = {
    "": "None (plain graph)",
    "time": "Time share (a result's profile)",
    "sqnr": "Accuracy loss, SQNR (a result's INT8 layer ranking)",
    "placement": "Execution provider (a result's profile)",
    "compat": "Compatibility status (one backend)",
    "flops": "FLOPs (counted from shapes)",
    "memory": "Activation memory (counted from shapes)",
}
NEEDS_RESULT = ("time", "sqnr", "placement")
# light to dark (ColorBrewer YlOrRd); the ink each fill needs to stay readable
SCALE = ("#ffffb2", "#fecc5c", "#fd8d3c", "#f03b20", "#bd0026")
INK = ("#000000", "#000000", "#000000", "#ffffff", "#ffffff")
CATEGORIES = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
STATUS_COLOURS = {
    CellStatus.SUPPORTED: ("#2ca02c", "#ffffff"),
    CellStatus.PARTIAL: ("#fdae61", "#000000"),
    CellStatus.UNSUPPORTED: ("#d62728", "#ffffff"),
    CellStatus.UNKNOWN: ("#bdbdbd", "#000000"),
}
CONVERTS = (*CONVERSION_OPS, *LAYOUT_OPS)  # inserted by the runtime; they fuse nothing
SQNR_BINS = (1.0, 3.0, 10.0, 20.0)  # dB lost: under 1 is noise, 20 and more is broken


@dataclass(frozen=True)
class Mark:
    """One node's paint: fill, text colour, tooltip (plain text) and the number behind it."""

    fill: str
    ink: str
    title: str
    value: float | None = None


@dataclass(frozen=True)
class Overlay:
    kind: str
    title: str
    legend: tuple[tuple[str, str], ...]  # (fill, label)
    marks: dict[str, Mark] = field(default_factory=dict)  # node key -> mark
    note: str = ""  # how the numbers were attributed, said beside the legend

    def ranked(self) -> list[str]:
        """Node keys by value, largest first (the hottest, the most lossy, the costliest)."""
        valued = [(k, m.value) for k, m in self.marks.items() if m.value is not None]
        return [k for k, _ in sorted(valued, key=lambda kv: (-kv[1], kv[0]))]

    def to_json(self, structure: GraphStructure) -> bytes:
        """What the viewer reads: marks keyed by the name Netron finds each node by."""
        focus = {n.key: n.focus for n in structure.nodes}
        return json.dumps(
            {
                "kind": self.kind,
                "title": self.title,
                "legend": [list(entry) for entry in self.legend],
                "nodes": [
                    [focus[key], m.fill, m.ink, m.title]
                    for key, m in self.marks.items()
                    if key in focus
                ],
            }
        ).encode()


def _bin(fraction: float, edges: Iterable[float] = (0.2, 0.4, 0.6, 0.8)) -> int:
    return sum(fraction >= e for e in edges)


def _scaled(
    kind: str,
    title: str,
    structure: GraphStructure,
    values: dict[str, float],
    describe: Callable[[str, float], str],
    unit: Callable[[float], str],
) -> Overlay:
    """A sequential overlay: five bins of the largest value, each labelled with its range."""
    top = max(values.values(), default=0.0)
    ops = {n.key: n.op_type for n in structure.nodes}
    marks = {}
    for key, value in values.items():
        if key not in ops:
            continue
        index = _bin(value / top) if top > 0 else 0
        marks[key] = Mark(SCALE[index], INK[index], describe(key, value), value)
    bounds = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    legend = tuple(
        (SCALE[i], f"{unit(bounds[i] * top)} to {unit(bounds[i + 1] * top)}") for i in range(5)
    )
    return Overlay(kind, title, legend, marks)


def _node_label(structure: GraphStructure, key: str) -> str:
    op = next((n.op_type for n in structure.nodes if n.key == key), "?")
    return f"{key} ({op})"


def time_overlay(structure: GraphStructure, profile: Profile, label: str) -> Overlay:
    """Each uploaded node's share of the profiled time. A runtime node that ran several uploaded
    nodes (a fused Conv+Relu kernel) has its time split among all of them by their counted FLOPs
    (Profile.parts), so the Conv carries it, not the Relu the kernel's name or output points at;
    each tooltip names the kernel, the nodes it ran with and the part given to this node."""
    per_run = per_source_us(profile)
    total = profile.total_us / profile.runs or 1.0  # every runtime node's, traced or not
    ran_as: dict[str, list[str]] = defaultdict(list)
    for node in sorted(profile.nodes, key=lambda n: -n.total_us):  # hottest runtime node first
        for source, part in profile.parts(node):
            line = f"{node.name} ({node.op_type}, {node.provider}, {node.per_run_us:.1f} us)"
            others = [s for s in node.source_nodes if s != source]
            if others:
                more = f" and {len(others) - 3} more" if len(others) > 3 else ""
                how = "by counted FLOPs" if _by_flops(profile, node) else "equal parts"
                joined = "converting data of" if node.op_type in CONVERTS else "fused with"
                line += f", {joined} {', '.join(others[:3])}{more}: {part:.0%} of it here ({how})"
            ran_as[source].append(line)
    ops = {n.key: n.op_type for n in structure.nodes}
    shares = {k: v / total for k, v in per_run.items() if k in ops}

    def describe(key: str, share: float) -> str:
        ran = "; ".join(ran_as.get(key, [])[:4])
        return (
            f"{key} ({ops[key]}): {share:.1%} of the profiled time of {label}, "
            f"{per_run[key]:.1f} us per run" + (f"\nran as {ran}" if ran else "")
        )

    overlay = _scaled(
        "time", f"Time share: {label}", structure, shares, describe, lambda v: f"{v:.1%}"
    )
    return replace(overlay, note=fused_note(profile, ops))


def _by_flops(profile: Profile, node: NodeProfile) -> bool:
    return split_by_flops(node.source_nodes, profile.source_flops)


def fused_note(profile: Profile, ops: dict[str, str]) -> str:
    """How the time of fused kernels reached the nodes painted, in one or two sentences."""
    if untraced := untraced_note(profile):  # the Jobs page says it too (progress.py)
        return untraced
    fused = sorted(
        (n for n in profile.nodes if len(n.source_nodes) > 1 and n.op_type not in CONVERTS),
        key=lambda n: -n.total_us,
    )
    if not fused:
        return "Each runtime node ran one uploaded node; its time is painted on that node."
    hottest = fused[0]
    example = "+".join(dict.fromkeys(ops.get(s, "?") for s in hottest.source_nodes))
    main, part = max(profile.parts(hottest), key=lambda p: p[1])
    split = [_by_flops(profile, n) for n in fused]
    if all(split):
        how = (
            f"by their FLOPs counted at the profiled shapes (the hottest, {hottest.name}, gives "
            f"{part:.0%} of its time to {main}, a {ops.get(main, '?')})"
        )
    elif any(split):
        how = "by their FLOPs, or in equal parts where their FLOPs could not be counted"
    else:
        how = "in equal parts, as their FLOPs could not be counted at the profiled shapes"
    return (
        f"{counted(len(fused), 'runtime node')} ran several uploaded nodes "
        f"{'each ' if len(fused) > 1 else ''}as one fused kernel "
        f"(e.g. {example}); each kernel's time is split among all the nodes it ran {how}. "
        "Conversions the runtime inserted (layout reorders, Q/DQ) count with the nodes whose "
        "data they convert."
    )


def source_index(structure: GraphStructure) -> SourceIndex:
    """Who produces and consumes each tensor, to trace a derived node name back to the upload."""
    producer: dict[str, str] = {}
    consumers: dict[str, list[str]] = defaultdict(list)
    for node in structure.nodes:
        for out in node.outputs:
            producer[out] = node.key
        for inp in node.inputs:
            consumers[inp].append(node.key)
    return SourceIndex({n.key: n.op_type for n in structure.nodes}, producer, dict(consumers))


def sqnr_overlay(structure: GraphStructure, losses: list[NodeLoss], label: str) -> Overlay:
    """dB of SQNR each node loses in the INT8 model (against FP32), on the uploaded node it
    stands for; only the ranked (stored) nodes are painted."""
    index = source_index(structure)
    marks: dict[str, Mark] = {}
    for loss in losses:
        matched = index.match(loss.node, [], [])
        if not matched or matched[0] in marks:
            continue
        key = matched[0]
        bin_ = _bin(loss.loss_db, SQNR_BINS)
        title = (
            f"{_node_label(structure, key)}: loses {loss.loss_db:.1f} dB of SQNR in {label} "
            f"(SQNR {loss.input_sqnr_db:.1f} dB in, {loss.output_sqnr_db:.1f} dB out; "
            f"INT8 node {loss.node}, {loss.op_type})"
        )
        marks[key] = Mark(SCALE[bin_], INK[bin_], title, loss.loss_db)
    edges = (0.0, *SQNR_BINS)
    legend = tuple(
        (
            SCALE[i],
            f"{edges[i]:g} to {edges[i + 1]:g} dB lost"
            if i < 4
            else f"{edges[i]:g} dB or more lost",
        )
        for i in range(5)
    )
    return Overlay("sqnr", f"Accuracy loss (SQNR): {label}", legend, marks)


def placement_overlay(structure: GraphStructure, profile: Profile, label: str) -> Overlay:
    """The execution provider (and, where reported, the precision) each uploaded node ran on."""
    ran_on: dict[str, dict[str, None]] = defaultdict(dict)
    precision: dict[str, dict[str, None]] = defaultdict(dict)
    for node in profile.nodes:
        for source in node.source_nodes:
            ran_on[source][node.provider] = None
            if node.precision:
                precision[source][node.precision] = None
    ops = {n.key for n in structure.nodes}
    places = {k: " + ".join(v) for k, v in ran_on.items() if k in ops}
    order = sorted(set(places.values()), key=lambda p: (-list(places.values()).count(p), p))
    colours = {p: CATEGORIES[i % len(CATEGORIES)] for i, p in enumerate(order)}
    counts = {p: list(places.values()).count(p) for p in order}
    marks = {}
    for key, place in places.items():
        extra = f", precision {'/'.join(precision[key])}" if precision.get(key) else ""
        title = f"{_node_label(structure, key)}: ran on {place}{extra} in {label}"
        marks[key] = Mark(colours[place], "#ffffff", title)
    legend = tuple((colours[p], f"{p} ({counted(counts[p], 'node')})") for p in order)
    return Overlay("placement", f"Execution provider: {label}", legend, marks)


def compat_overlay(structure: GraphStructure, matrix: CompatMatrix, backend: str) -> Overlay:
    """Each node's status on one backend column of the compatibility matrix, with its reason."""
    main = [n for n in matrix.nodes if n.graph == MAIN]
    cells = matrix.cells.get(backend, [])
    counts: dict[CellStatus, int] = defaultdict(int)
    marks = {}
    for node, facts in zip(structure.nodes, main, strict=False):
        if facts.index >= len(cells):
            continue
        cell = cells[facts.index]
        placed = matrix.placed_on(backend, facts)
        counts[cell.status] += 1
        fill, ink = STATUS_COLOURS[cell.status]
        title = (
            f"{_node_label(structure, node.key)}: {cell.status.value} on {backend}: {cell.reason}"
        )
        if placed:
            title += f"\nplaced on {placed}"
        if cell.fix:
            title += f"\nfix: {cell.fix}"
        marks[node.key] = Mark(fill, ink, title)
    legend = tuple(
        (STATUS_COLOURS[s][0], f"{s.value} ({counted(counts[s], 'node')})")
        for s in CellStatus
        if counts[s]
    )
    return Overlay("compat", f"Compatibility on {backend}", legend, marks)


def cost_overlay(structure: GraphStructure, cost: ModelCost, kind: str) -> Overlay:
    """FLOPs ("flops") or output activation bytes ("memory") per node, from the counted cost."""
    flops = kind == "flops"
    values = {n.name: float(n.flops if flops else n.activation_bytes) for n in cost.nodes}
    counted = {n.name: n.counted for n in cost.nodes}
    total = sum(values.values()) or 1.0
    ops = {n.key: n.op_type for n in structure.nodes}
    unit = "FLOPs" if flops else "B"

    def describe(key: str, value: float) -> str:
        what = "" if flops else " of output activations"
        gap = "" if counted.get(key, True) or not flops else " (no rule for this op: not counted)"
        return (
            f"{key} ({ops[key]}): {scaled(value, unit)}{what}, {value / total:.1%} of the "
            f"model at batch {cost.batch_size}{gap}"
        )

    title = "FLOPs" if flops else "Activation memory"
    return _scaled(
        kind,
        f"{title} at batch {cost.batch_size}",
        structure,
        values,
        describe,
        lambda v: scaled(v, unit),
    )
