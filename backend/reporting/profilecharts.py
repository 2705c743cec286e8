"""Plotly figures of one profile (per-node bars, op-type breakdown) and of two (the diff)."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from backend.engine.evidence import computes_in_int8, per_source_us, source_deltas
from backend.engine.profile import CONVERSION_OPS, NodeProfile, Profile

KIND_COLORS = {
    "int8 kernel": "#00a3a3",
    "float kernel": "#636efa",
    "conversion": "#ef553b",
    "kept in FP32": "#ab63fa",
}


def _text(name: str) -> str:
    """A node or op name (from the upload or the runtime) for Plotly, whose tick, hover and
    legend text reads a subset of HTML (<a href>, <img>-like tags): shown as written instead."""
    return html.escape(str(name), quote=False)


def node_kind(profile: Profile, node: NodeProfile) -> str:
    """What a bar stands for: an int8 or float kernel, a conversion, or a node kept in FP32."""
    if profile.is_kept(node):
        return "kept in FP32"
    if node.op_type in CONVERSION_OPS:
        return "conversion"
    return "int8 kernel" if computes_in_int8(node) else "float kernel"


def _layout(fig: go.Figure, title: str, x: str, rows: int) -> go.Figure:
    fig.update_layout(
        title=title,
        xaxis_title=x,
        template="plotly_white",
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        height=max(260, 22 * rows + 100),
        legend={"orientation": "h", "yanchor": "top", "y": -0.15},
        barmode="overlay",
    )
    return fig


def _inside(node: NodeProfile) -> str:
    """The hover line of a branch node: its time is part of its If's bar, not beside it."""
    if not node.parent:
        return ""
    return f"<br>inside {_text(node.parent)}: included in its time"


def node_bars(profile: Profile, top: int = 30) -> go.Figure:
    """The hottest runtime nodes, us per run, coloured by kind; hover names the uploaded nodes."""
    nodes = profile.hottest(top)[::-1]
    fig = go.Figure()
    for kind, color in KIND_COLORS.items():
        picked = [n for n in nodes if node_kind(profile, n) == kind]
        if not picked:
            continue
        fig.add_trace(
            go.Bar(
                x=[n.per_run_us for n in picked],
                y=[_text(n.name) for n in picked],
                orientation="h",
                name=kind,
                marker_color=color,
                customdata=[
                    [_text(n.op_type), _text(", ".join(n.source_nodes) or "-"), _inside(n)]
                    for n in picked
                ],
                hovertemplate="%{y} (%{customdata[0]}): %{x:.1f} us<br>"
                "uploaded node(s): %{customdata[1]}%{customdata[2]}<extra></extra>",
            )
        )
    fig.update_yaxes(categoryorder="array", categoryarray=[_text(n.name) for n in nodes])
    return _layout(fig, "Time per node (profiled pass)", "us per run", len(nodes))


def op_type_bars(profile: Profile, top: int = 25) -> go.Figure:
    """Share of the profiled time per op type as the runtime ran it."""
    rows = list(profile.by_op_type().items())[:top][::-1]
    fig = go.Figure(
        go.Bar(
            x=[100 * row["share"] for _, row in rows],
            y=[_text(op) for op, _ in rows],
            orientation="h",
            marker_color="#00a3a3",
            customdata=[int(row["nodes"]) for _, row in rows],
            hovertemplate="%{y}: %{x:.1f}% in %{customdata} node(s)<extra></extra>",
        )
    )
    return _layout(fig, "Time by op type", "% of profiled time", len(rows))


def diff_bars(before: Profile, after: Profile, labels: tuple[str, str], top: int = 20) -> go.Figure:
    """Uploaded nodes whose time changed most between two configurations, both bars side by side."""
    rows = source_deltas(before, after)[:top][::-1]
    fig = go.Figure()
    for index, (label, color) in enumerate(zip(labels, ("#636efa", "#ef553b"), strict=True)):
        fig.add_trace(
            go.Bar(
                x=[row[1 + index] for row in rows],
                y=[_text(row[0]) for row in rows],
                orientation="h",
                name=_text(label),
                marker_color=color,
                hovertemplate=f"%{{y}}: %{{x:.1f}} us per run ({_text(label)})<extra></extra>",
            )
        )
    fig.update_layout(barmode="group")
    fig = _layout(
        fig,
        f"Per uploaded node: {_text(labels[0])} vs {_text(labels[1])}",
        "us per run",
        2 * len(rows),
    )
    fig.update_layout(barmode="group")
    return fig


def hottest_rows(profile: Profile, focus: dict[str, str], count: int = 10) -> list[dict]:
    """The hottest runtime nodes with the uploaded node each stands for and the key the Graph
    page's viewer finds it by (backend.viewer.focus_keys); None where no uploaded node maps.

    share: of the session's node time, each node's counted once. A node of an If's branch keeps
    its own share, with `inside` naming the If whose share already includes it; `own_share` is
    a node's share less its branch nodes' (the If's own overhead), its share for any other."""
    rows = []
    total = profile.total_us
    branch_us = profile.branch_us()
    for node in profile.hottest(count):
        # a fused kernel stands for the uploaded node it mostly ran (the Conv of Conv+Relu)
        parts = sorted(profile.parts(node), key=lambda part: -part[1])
        source = next((name for name, _ in parts if name in focus), None)
        rows.append(
            {
                "node": node.name,
                "op_type": node.op_type,
                "us_per_run": node.per_run_us,
                "share": profile.share([node]),
                "own_share": profile.own_us(node, branch_us) / total if total else 0.0,
                "inside": node.parent or None,
                "uploaded_node": source,
                "focus": focus.get(source) if source else None,
            }
        )
    return rows


__all__ = [
    "diff_bars",
    "hottest_rows",
    "node_bars",
    "node_kind",
    "op_type_bars",
    "per_source_us",
]
