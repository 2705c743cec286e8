"""The uploaded graph against one of its variants (FP16, INT8 QDQ, mixed, INT4, simplified,
ORT-optimized): which nodes were kept, changed, fused, added, removed, and the Q/DQ and Cast
nodes inserted, with counts that add up to both graphs' node counts.

Variants are built from a copy whose unnamed nodes are named '<op>_<index>'
(backend.engine.profile.name_nodes), so a variant node is traced back the way profiles are:
by name where it survived, else through the tensors it reads and writes (SourceIndex.match).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from backend.counts import counted
from backend.engine.profile import QDQ_OPS, Profile, name_stages
from backend.graphview.overlay import Mark, Overlay, source_index
from backend.graphview.structure import GraphStructure

# variant-side categories (every variant node has one) and the upload-side one
KEPT, CHANGED, FUSED, ADDED, QDQ, CAST = (
    "kept",
    "changed op",
    "fused",
    "added",
    "Q/DQ inserted",
    "Cast inserted",
)
REMOVED = "removed"
VARIANT_KINDS = (KEPT, CHANGED, FUSED, ADDED, QDQ, CAST)
COLOURS = {
    KEPT: ("#e0e0e0", "#000000"),
    CHANGED: ("#1f77b4", "#ffffff"),
    FUSED: ("#9467bd", "#ffffff"),
    ADDED: ("#2ca02c", "#ffffff"),
    QDQ: ("#ff7f0e", "#000000"),
    CAST: ("#d62728", "#ffffff"),
}


@dataclass(frozen=True)
class Change:
    """One node of the variant (or, for `removed`, of the upload) and what happened to it."""

    kind: str
    node: str  # the variant's node key (the upload's, for removed)
    op_type: str
    sources: tuple[str, ...] = ()  # uploaded nodes it stands for
    source_ops: tuple[str, ...] = ()


@dataclass
class VariantDiff:
    uploaded_nodes: int
    variant_nodes: int
    changes: list[Change] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counted = Counter(c.kind for c in self.changes)
        return {k: counted.get(k, 0) for k in (*VARIANT_KINDS, REMOVED)}

    def changed(self) -> list[Change]:
        return [c for c in self.changes if c.kind != KEPT]

    def fused_sources(self) -> int:
        """Uploaded nodes folded into another variant node (beyond the one it keeps the name of)."""
        return sum(max(0, len(c.sources) - 1) for c in self.changes if c.kind == FUSED)

    def rows(self, profile: Profile | None = None) -> list[dict[str, object]]:
        """A unified list, changed nodes first; with a profile of the variant, each row carries
        its runtime time so the hottest changed nodes come first."""
        times: dict[str, float] = {}
        if profile is not None:
            total = profile.total_us or 1.0
            for node in profile.nodes:
                # an uploaded node gets its part of a fused kernel (by FLOPs, Profile.parts),
                # the runtime node its whole time
                weights = dict(profile.parts(node))
                weights.setdefault(node.name, 1.0)
                for key, weight in weights.items():
                    times[key] = times.get(key, 0.0) + node.total_us / total * weight
        rows = [
            {
                "change": c.kind,
                "node": c.node,
                "op": c.op_type,
                "uploaded nodes": ", ".join(c.sources),
                "uploaded ops": ", ".join(c.source_ops),
                "time share": times.get(c.node, times.get(c.sources[0]) if c.sources else None)
                if profile is not None
                else None,
            }
            for c in self.changes
            if c.kind != KEPT
        ]
        return sorted(
            rows, key=lambda r: (-(r["time share"] or 0.0), str(r["change"]), str(r["node"]))
        )

    def overlay(self, label: str) -> Overlay:
        """The variant drawn with its changed nodes coloured by what happened to them."""
        counts = self.counts()
        marks = {}
        for c in self.changes:
            if c.kind == REMOVED:
                continue
            fill, ink = COLOURS[c.kind]
            origin = f" from {', '.join(c.sources)}" if c.sources else ""
            marks[c.node] = Mark(fill, ink, f"{c.node} ({c.op_type}): {c.kind}{origin}")
        legend = tuple(
            (COLOURS[k][0], f"{k} ({counted(counts[k], 'node')})")
            for k in VARIANT_KINDS
            if counts[k]
        )
        return Overlay("diff", f"Changes against the upload: {label}", legend, marks)


def _prefix_source(key: str, ops: dict[str, str]) -> str | None:
    """The longest uploaded node name `key` extends ('MatMul_16_quant' -> 'MatMul_16')."""
    best = None
    for cut in range(len(key) - 1, 0, -1):
        if key[cut] in "_/" and key[:cut] in ops:
            best = key[:cut]
            break
    return best


def variant_diff(uploaded: GraphStructure, variant: GraphStructure) -> VariantDiff:
    """Classify every variant node, and every uploaded node no variant node stands for."""
    index = source_index(uploaded)
    ops = {n.key: n.op_type for n in uploaded.nodes}
    covered: set[str] = set()
    kinds: dict[str, Change] = {}
    later = []
    for node in variant.nodes:  # first what survived by name (or a stage of it)
        if node.op_type in QDQ_OPS and node.key not in ops:
            kinds[node.key] = Change(QDQ, node.key, node.op_type)
        elif node.op_type == "Cast" and node.key not in ops:
            kinds[node.key] = Change(CAST, node.key, node.op_type)
        elif any(s in ops for s in name_stages(node.key)) or "/" in node.key:
            sources = tuple(index.match(node.key, list(node.inputs), list(node.outputs)))
            fresh = tuple(s for s in sources if s not in covered)
            if not fresh or not any(s in ops for s in name_stages(node.key)) and len(fresh) == 1:
                later.append(node)
                continue
            covered.update(fresh)
            source_ops = tuple(ops[s] for s in fresh)
            kind = FUSED if len(fresh) > 1 else KEPT if source_ops[0] == node.op_type else CHANGED
            kinds[node.key] = Change(kind, node.key, node.op_type, fresh, source_ops)
        else:
            later.append(node)
    # then replacements named after an uploaded node: the shortest such name takes its place
    for node in sorted(later, key=lambda n: (len(n.key), n.key)):
        source = _prefix_source(node.key, ops)
        if source is not None and source not in covered:
            covered.add(source)
            kind = KEPT if ops[source] == node.op_type else CHANGED
            kinds[node.key] = Change(kind, node.key, node.op_type, (source,), (ops[source],))
            continue
        near = (
            (source,)
            if source
            else tuple(index.match(node.key, list(node.inputs), list(node.outputs)))
        )
        kinds[node.key] = Change(ADDED, node.key, node.op_type, near)
    diff = VariantDiff(len(uploaded.nodes), len(variant.nodes))
    diff.changes = [kinds[n.key] for n in variant.nodes if n.key in kinds]
    for node in uploaded.nodes:
        if node.key not in covered:
            diff.changes.append(
                Change(REMOVED, node.key, node.op_type, (node.key,), (node.op_type,))
            )
    return diff
