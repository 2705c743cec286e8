"""Explanations computed from this run's profile and graph, each citing the run's own numbers.

Profile times carry the profiler's overhead, so they are used as shares of the profiled run, and
predictions scale the clean latency by those shares.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from backend.counts import counted
from backend.engine.profile import (
    CONVERSION_OPS,
    OV_CONVERSION_OPS,
    QDQ_OPS,
    NodeProfile,
    Profile,
)

# what sits between int8 and float compute: ORT's Q/DQ, OpenVINO's FakeQuantize, and its Reorder
# or Convert where they run in int8 (an f32 Reorder is a layout change inside a float graph)
BOUNDARY_OPS = (*QDQ_OPS, *OV_CONVERSION_OPS)
INT8_PRECISIONS = ("i8", "u8", "int8", "uint8")


def is_boundary(node: NodeProfile) -> bool:
    """A conversion between int8 and float: Q/DQ or FakeQuantize, or an int8 Reorder/Convert."""
    if node.op_type in (*QDQ_OPS, "FakeQuantize"):
        return True
    return node.op_type in OV_CONVERSION_OPS and node.precision in INT8_PRECISIONS


MIN_SHARE = 0.05  # a fact about less than 5% of the time is not worth a line
# ORT's kernels that compute on int8 data: QLinearConv/MatMul/Add/..., QGemm, QAttention,
# QOrderedMatMul, QEmbedLayerNormalization, DynamicQuantizeMatMul/LSTM, MatMulInteger,
# ConvInteger, MatMulIntegerToFloat. DynamicQuantizeLinear is a conversion (CONVERSION_OPS).
_INT8_KERNEL_PREFIXES = ("QLinear", "QGemm", "QAttention", "QOrdered", "QEmbed", "DynamicQuantize")
UNKNOWN_OPS = ("", "?")  # the profiler named no op for the node


def runs_in_int8(op_type: str) -> bool:
    """Whether a kernel computes on int8 data (QLinearConv, MatMulInteger, QGemm, ...)."""
    if op_type in CONVERSION_OPS:
        return False
    return op_type.startswith(_INT8_KERNEL_PREFIXES) or "Integer" in op_type


def computes_in_int8(node: NodeProfile) -> bool:
    """By the precision the runtime reports for the node (OpenVINO), else by its op type (ORT)."""
    if node.precision:
        return node.precision in INT8_PRECISIONS
    return runs_in_int8(node.op_type)


def computes(node: NodeProfile) -> bool:
    """A node that computes (not a conversion) and whose kernel can be told: by the precision
    the runtime reports (OpenVINO), else by the op type ONNX Runtime's profiler names."""
    if node.op_type in CONVERSION_OPS or is_boundary(node):
        return False
    return bool(node.precision) or node.op_type not in UNKNOWN_OPS


@dataclass
class FloatIsland:
    """Uploaded nodes of one op type that ran in float inside an INT8 graph, with what they cost:
    their runtime nodes that compute in float, and the Q/DQ conversions around them. An uploaded
    op the runtime splits (HardSwish into HardSigmoid + Mul) may have a part in int8 too."""

    op_type: str  # the uploaded op, e.g. HardSwish
    sources: set[str] = field(default_factory=set)  # every uploaded node its kernels ran
    of_op: set[str] = field(default_factory=set)  # those of op_type (not the Relu of Conv+Relu)
    nodes: list[NodeProfile] = field(default_factory=list)  # runtime nodes computing in float
    conversions: list[NodeProfile] = field(default_factory=list)
    int8_nodes: list[NodeProfile] = field(default_factory=list)  # parts that ran int8 kernels
    quantized_elsewhere: int = 0  # other uploaded nodes of this op type that ran int8 kernels

    def share(self, profile: Profile) -> float:
        return profile.share({n.name: n for n in self.nodes + self.conversions}.values())

    def conversion_share(self, profile: Profile) -> float:
        return profile.share(self.conversions)


def _neighbours(profile: Profile) -> dict[str, list[NodeProfile]]:
    producer = {t: n for n in profile.nodes for t in n.outputs}
    consumers: dict[str, list[NodeProfile]] = defaultdict(list)
    for node in profile.nodes:
        for tensor in node.inputs:
            consumers[tensor].append(node)
    return {
        node.name: [producer[t] for t in node.inputs if t in producer]
        + [c for t in node.outputs for c in consumers.get(t, [])]
        for node in profile.nodes
    }


def _quantized_sources(profile: Profile) -> dict[str, set[str]]:
    """{uploaded op type: uploaded nodes of it that ran an int8 kernel}."""
    found: dict[str, set[str]] = defaultdict(set)
    for node in profile.nodes:
        if not computes(node) or not computes_in_int8(node):
            continue
        if len(node.source_ops) == 1:
            found[node.source_ops[0]].update(node.source_nodes)
        elif main := profile.main_source(node):  # a QLinearConv that ran Conv+Relu is a Conv
            found[main[1]].add(main[0])
    return found


def float_islands(profile: Profile) -> list[FloatIsland]:
    """Uploaded op types that computed in float here: their runtime nodes compute in float and
    are fed by DequantizeLinear or feed QuantizeLinear. Costliest first; each Q/DQ counts once.
    Named after the uploaded op (HardSwish), never after an int8 kernel made from it."""
    around = _neighbours(profile)
    islands: dict[str, FloatIsland] = {}
    claimed: set[str] = set()
    for node in profile.nodes:
        if not computes(node) or computes_in_int8(node) or profile.is_kept(node):
            continue
        if any(profile.is_kept(n) for n in around[node.name]):
            continue  # float because a neighbour was kept in FP32, not for want of a kernel
        qdq = [n for n in around[node.name] if is_boundary(n)]
        if not qdq:
            continue
        # name the island after the uploaded op (HardSwish), not the one it was split into;
        # a fused kernel after the op it mostly ran (the Conv of Conv+Relu)
        main = profile.main_source(node)
        op = node.source_ops[0] if len(node.source_ops) == 1 else main[1] if main else node.op_type
        island = islands.setdefault(op, FloatIsland(op))
        island.sources.update(node.source_nodes or [node.name])
        island.of_op.update([main[0]] if main else node.source_nodes or [node.name])
        island.conversions.extend(n for n in qdq if n.name not in claimed)
        claimed.update(n.name for n in qdq)
    quantized = _quantized_sources(profile)
    for island in islands.values():
        made = [n for n in profile.nodes if set(n.source_nodes) & island.sources and computes(n)]
        island.nodes = [n for n in made if not computes_in_int8(n)]
        island.int8_nodes = [n for n in made if computes_in_int8(n)]
        island.quantized_elsewhere = len(quantized.get(island.op_type, set()) - island.sources)
    return sorted(islands.values(), key=lambda i: -i.share(profile))


def _speed_word(speedup: float) -> str:
    """'1.30x faster than FP32' / '0.80x the speed of FP32', always with the number."""
    if speedup >= 1.0:
        return f"{speedup:.2f}x faster than FP32"
    return f"{speedup:.2f}x the speed of FP32"


def _nodes(count: int, kind: str = "") -> str:
    """'1 Conv node', '3 Conv nodes'."""
    return counted(count, f"{kind} node".lstrip())


def _ops(nodes: list[NodeProfile], count: int = 6) -> str:
    kinds = sorted({n.op_type for n in nodes})
    more = f" and {len(kinds) - count} more" if len(kinds) > count else ""
    return ", ".join(kinds[:count]) + more


def _island_claim(island: FloatIsland) -> str:
    """What the island's nodes are and how they ran, from the profile alone."""
    one = len(island.of_op) == 1
    if island.quantized_elsewhere:  # the op has an int8 kernel: these were left out of it
        other = _nodes(island.quantized_elsewhere, f"other {island.op_type}")
        why = f"ran in float although {other} ran int8 kernels"
    else:
        why = f"{'has' if one else 'have'} no int8 kernel here"
    claim = (
        f"{_nodes(len(island.of_op), island.op_type)} that {why}: "
        f"{'it runs' if one else 'they run'} in float (as {_ops(island.nodes)}"
    )
    if island.int8_nodes:  # split by the runtime (HardSwish: HardSigmoid + Mul)
        parts = " + ".join(sorted({n.op_type for n in island.nodes + island.int8_nodes}))
        claim += (
            f"; ONNX Runtime splits each into {parts}, and only {_ops(island.int8_nodes)} "
            "runs in int8"
        )
    return claim + ")"


def island_lines(profile: Profile, label: str, speedup: float | None) -> list[str]:
    """'41% of INT8 time is in 11 HardSwish nodes that have no int8 kernel here ...'."""
    lines = []
    for island in float_islands(profile):
        share = island.share(profile)
        if share < MIN_SHARE:
            continue
        converting = island.conversion_share(profile)
        kinds = "/".join(sorted({n.op_type for n in island.conversions}))
        line = f"{share:.0%} of {label} time is in {_island_claim(island)}"
        if island.conversions:
            line += (
                f" with {_nodes(len(island.conversions), kinds)} around them "
                f"({converting:.0%} of the time)"
            )
        if speedup is not None and converting > 0:
            # an upper bound: neighbours that go float may need conversions of their own
            line += (
                f"; keeping them in FP32 removes those conversions, which would at best make "
                f"{label} {_speed_word(speedup / (1.0 - converting))} (now {_speed_word(speedup)})"
            )
        lines.append(line + ".")
    return lines


def kept_line(profile: Profile, label: str) -> str | None:
    """Nodes the configuration left in FP32 on purpose (attention, mixed precision)."""
    kept = [n for n in profile.nodes if profile.is_kept(n)]
    if not kept:
        return None
    ops = ", ".join(sorted({n.op_type for n in kept}))
    return (
        f"{_nodes(len(kept), label)} {'was' if len(kept) == 1 else 'were'} kept in FP32 on "
        f"purpose ({ops}); {'it takes' if len(kept) == 1 else 'they take'} "
        f"{profile.share(kept):.0%} of the time."
    )


def conversion_line(profile: Profile, label: str) -> str | None:
    """The share of time spent converting data rather than computing, by op type."""
    parts = []
    total = 0.0
    for op in CONVERSION_OPS:
        nodes = profile.of_op(op)
        if not nodes:
            continue
        share = profile.share(nodes)
        total += share
        parts.append(f"{op} {share:.0%} ({_nodes(len(nodes))})")
    if not parts or total < MIN_SHARE:
        return None
    return f"{total:.0%} of {label} time converts data rather than computing: {', '.join(parts)}."


def provider_line(profile: Profile, label: str) -> str | None:
    """Nodes that ran on another provider than the one asked for."""
    away = profile.off_provider()
    if not away:
        return None
    ops = sorted({n.op_type for n in away})
    return (
        f"{len(away)} of {_nodes(len(profile.nodes), label)} ({profile.share(away):.0%} of time) "
        f"ran on {', '.join(sorted({n.provider for n in away}))} instead of {profile.provider}: "
        f"{', '.join(ops[:6])}{' ...' if len(ops) > 6 else ''}."
    )


def hottest_line(profile: Profile, label: str, count: int = 3) -> str:
    """Where the time goes, by op type as the runtime ran it."""
    rows = list(profile.by_op_type().items())[:count]
    parts = [f"{op} {row['share']:.0%} ({_nodes(int(row['nodes']))})" for op, row in rows]
    return f"{label} time by op type: {', '.join(parts)}."


def precision_line(profile: Profile, label: str) -> str | None:
    """The share of time that ran int8 kernels and the float kernels that took the rest: by the
    precision the runtime reports per layer (OpenVINO), else by the kernel's op type (ONNX
    Runtime: QLinear*, QGemm, MatMulInteger ... compute on int8; Q/DQ are conversions)."""
    if not any(computes_in_int8(n) or is_boundary(n) for n in profile.nodes):
        return None  # a float graph: nothing to say about int8
    reported = any(n.precision for n in profile.nodes)  # OpenVINO: only layers with one count
    computing = [n for n in profile.nodes if computes(n) and (n.precision or not reported)]
    unknown = [] if reported else [n for n in profile.nodes if n.op_type in UNKNOWN_OPS]
    if not computing:
        return (
            f"The {label} profile names no kernel for its {_nodes(len(unknown), 'computing')}, so "
            "which of them ran int8 kernels is unknown."
        )
    unit = "layers" if reported else "nodes"
    int8 = [n for n in computing if computes_in_int8(n)]
    other = [n for n in computing if not computes_in_int8(n)]
    line = (
        f"{profile.share(int8):.0%} of {label} time ran int8 kernels ({len(int8)} of "
        f"{len(computing)} computing {unit}"
        + (f": {_ops(int8)})" if int8 and not reported else ")")
    )
    if other:
        if reported:
            kinds = ", ".join(sorted({f"{n.op_type} ({n.precision})" for n in other})[:6])
        else:
            kinds = _ops(other)
        word = "non-int8" if reported else "float"
        line += f"; {profile.share(other):.0%} ran in {len(other)} {word} {unit}: {kinds}"
    if unknown:
        line += f"; {_nodes(len(unknown))} could not be classified (no op type in the profile)"
    return line + "."


def facts(profile: Profile, label: str, speedup: float | None = None) -> list[str]:
    """Every profile fact worth a line, most telling first."""
    lines = island_lines(profile, label, speedup)
    others = (
        precision_line(profile, label),
        conversion_line(profile, label),
        kept_line(profile, label),
        provider_line(profile, label),
    )
    for line in others:
        if line:
            lines.append(line)
    lines.append(hottest_line(profile, label))
    return lines


def per_source_us(profile: Profile) -> dict[str, float]:
    """Microseconds per run of each uploaded node: a fused node's time is split among every node
    it ran by their counted FLOPs (Profile.parts), so a Conv+Relu kernel is mostly the Conv's."""
    times: dict[str, float] = defaultdict(float)
    for node in profile.nodes:
        for source, part in profile.parts(node):
            times[source] += node.total_us / profile.runs * part
    return dict(times)


def source_deltas(before: Profile, after: Profile) -> list[tuple[str, float, float]]:
    """(uploaded node, us per run before, after) for every node, biggest change first."""
    old, new = per_source_us(before), per_source_us(after)
    rows = [(k, old.get(k, 0.0), new.get(k, 0.0)) for k in set(old) | set(new)]
    return sorted(rows, key=lambda r: (-abs(r[2] - r[1]), r[0]))


def faster_slower(before: Profile, after: Profile, count: int = 3) -> list[str]:
    """Uploaded nodes whose time changed most between two profiles (e.g. FP32 -> INT8)."""
    return [
        f"{name}: {old:.0f} -> {new:.0f} us per run ({new - old:+.0f})"
        for name, old, new in source_deltas(before, after)[: 2 * count]
        if abs(new - old) >= 1.0
    ]
