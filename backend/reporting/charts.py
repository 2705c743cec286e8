"""Plotly figures built from reporting DataFrames; no Streamlit here, so reports reuse them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from backend.engine.measure import PEAK_SCOPE
from backend.reporting.front import COST_FRONT, SPEEDUP_FRONT, scope_names
from backend.reporting.marks import markers_by_series, symbol_key  # generation reads it here
from backend.reporting.metrics import REGISTRY, pick
from backend.reporting.style import (
    apply_layout,
    category_ticks,
    escaped,
    rgba,
    series_colors,
    svg_text,
)
from backend.results import ResultStatus

# Above this many series, distributions are drawn as boxes from precomputed quantiles of the raw
# samples rather than violins of every sample: the page stays fast and still readable.
MAX_VIOLINS = 12
P50, P90, P99, THROUGHPUT = pick("p50_ms", "p90_ms", "p99_ms", "throughput")
SPEEDUP, LOSS, RSS, GPU_MEMORY = pick("speedup", "accuracy_loss", "peak_rss_mb", "gpu_memory_mb")


def pareto_trace(front: pd.DataFrame, x: str, y: str, name: str = "") -> go.Scatter:
    """The Pareto front's points (of one model, `name`, where each has its own), starred."""
    return go.Scatter(
        x=front[x],
        y=front[y],
        mode="lines+markers",
        name=f"Pareto front {name}".strip(),
        line={"color": "black", "dash": "dash"},
        marker={"symbol": "star", "size": 16, "color": "gold", "line": {"width": 1}},
        text=front["label"],
        hovertemplate="%{text}<br>on the Pareto front<extra></extra>",
    )


def front_traces(fig: go.Figure, data: pd.DataFrame, column: str, keys: tuple[str, ...]) -> None:
    """One starred line per front (front.each_front: each model's, and each baseline's for
    speedups), named where there are several: a line joining two models' points drew a trade-off
    between configurations that are no alternatives to each other."""
    names = scope_names(data, keys)
    on = data[column].fillna(False).astype(bool)
    for name, rows in data[on].groupby(names[on], sort=False):
        named = svg_text(str(name))  # a model's name from an upload, as escaped() does labels
        fig.add_trace(pareto_trace(rows.sort_values(keys[0]), keys[0], keys[-1], named))


TAIL_FOR_LOG_Y = 10.0  # a p99 this many times the largest p50 puts latency on a log axis


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return escaped(frame[(frame["status"] == ResultStatus.OK.value) & frame["p50_ms"].notna()])


def _latency_traces(name: str, group: pd.DataFrame, color: str) -> list[go.Scatter]:
    """One series of latency_vs_batch: the p50..p99 band, the dotted p90 and the p50 line."""
    x = group["batch_size"].tolist()
    band = go.Scatter(
        x=x + x[::-1],
        y=group["p99_ms"].tolist() + group["p50_ms"].tolist()[::-1],
        mode="lines",
        fill="toself",
        fillcolor=rgba(color, 0.15),
        line={"width": 0},
        hoverinfo="skip",
        showlegend=False,
        legendgroup=name,
    )
    p90 = go.Scatter(
        x=x,
        y=group["p90_ms"],
        mode="lines+markers",
        marker={"symbol": "line-ew-open", "size": 12, "color": color},
        line={"color": color, "dash": "dot", "width": 1},
        name=f"{name} p90",
        legendgroup=name,
        showlegend=False,
        hovertemplate=f"batch %{{x}}<br>p90 {P90.hover('y')}<extra>" + name + "</extra>",
    )
    p50 = go.Scatter(
        x=x,
        y=group["p50_ms"],
        mode="lines+markers",
        line={"color": color},
        name=name,
        legendgroup=name,
        error_y={
            "type": "data",
            "symmetric": False,
            "array": (group["p99_ms"] - group["p50_ms"]).tolist(),
            "arrayminus": [0.0] * len(group),
            "color": rgba(color, 0.5),
            "thickness": 1,
        },
        customdata=np.stack([group["p90_ms"], group["p99_ms"]], axis=-1),
        hovertemplate=(
            f"batch %{{x}}<br>p50 {P50.hover('y')}<br>p90 {P90.hover('customdata[0]')}"
            f"<br>p99 {P99.hover('customdata[1]')}<extra>" + name + "</extra>"
        ),
    )
    return [band, p90, p50]


def latency_vs_batch(frame: pd.DataFrame) -> go.Figure:
    """p50 per call against batch size, one line per configuration, shaded up to p99."""
    data = _ok(frame)
    fig = go.Figure()
    colors = series_colors(list(dict.fromkeys(data["series"])))
    for name, group in data.groupby("series", sort=False):
        fig.add_traces(_latency_traces(name, group.sort_values("batch_size"), colors[name]))
    title = "Latency per call (p50; band and whisker to p99; dotted p90)"
    # one stalled run's p99 would flatten every p50 line against the axis on a linear scale
    tail = not data.empty and data["p99_ms"].max() > TAIL_FOR_LOG_Y * data["p50_ms"].max()
    if tail:
        title += f"; log scale: a p99 is over {TAIL_FOR_LOG_Y:g}x the largest p50"
    fig = apply_layout(fig, title, "batch size", P50.unit, log_x=True)
    return fig.update_yaxes(type="log") if tail else fig


def throughput_vs_batch(frame: pd.DataFrame) -> go.Figure:
    data = _ok(frame)
    fig = go.Figure()
    colors = series_colors(list(dict.fromkeys(data["series"])))
    for name, group in data.groupby("series", sort=False):
        group = group.sort_values("batch_size")
        fig.add_trace(
            go.Scatter(
                x=group["batch_size"],
                y=group["throughput"],
                mode="lines+markers",
                name=name,
                line={"color": colors[name]},
                hovertemplate=f"batch %{{x}}<br>{THROUGHPUT.hover('y', ',.1f')}<extra>"
                + name
                + "</extra>",
            )
        )
    return apply_layout(fig, "Throughput", "batch size", THROUGHPUT.unit, log_x=True)


def _boxes(rows: list, samples: dict[int, np.ndarray], color: str) -> go.Box:
    """One series' boxes from precomputed quartiles and p1/p99 whiskers of the raw samples."""
    stats = np.array([np.percentile(samples[r.result_id], [25, 50, 75, 1, 99]) for r in rows])
    return go.Box(
        x=[r.label for r in rows],
        q1=stats[:, 0],
        median=stats[:, 1],
        q3=stats[:, 2],
        lowerfence=stats[:, 3],
        upperfence=stats[:, 4],
        mean=[float(samples[r.result_id].mean()) for r in rows],
        marker_color=color,
        showlegend=False,
    )


def latency_distribution(frame: pd.DataFrame, samples: dict[int, np.ndarray]) -> go.Figure:
    """Distribution of raw per-call latencies of each configuration."""
    data = _ok(frame)
    data = data[data["result_id"].isin(list(samples))]
    fig = go.Figure()
    colors = series_colors(list(dict.fromkeys(data["series"])))
    many = len(data) > MAX_VIOLINS
    rows = [row for row in data.itertuples(index=False) if samples[row.result_id].size]
    if many:  # precomputed boxes, a trace per series (not per box: hundreds are slow to draw)
        for name in dict.fromkeys(r.series for r in rows):  # each in its series' colour
            fig.add_trace(_boxes([r for r in rows if r.series == name], samples, colors[name]))
    else:
        for row in rows:
            fig.add_trace(
                go.Violin(
                    y=samples[row.result_id],
                    name=row.label,
                    line_color=colors[row.series],
                    box_visible=True,
                    meanline_visible=True,
                    points=False,
                    spanmode="hard",  # the calls measured: the density's tails went below 0 ms
                    showlegend=False,
                )
            )
    title = "Latency distribution of every call"
    if many:
        title += " (box: quartiles, whiskers p1–p99)"
    fig = apply_layout(fig, title, "", P50.unit)
    return category_ticks(fig, len(rows))


def accuracy_vs_speedup(frame: pd.DataFrame, loss_label: str) -> go.Figure:
    """Speedup against accuracy loss; the Pareto front (best trade-offs among stable
    measurements, front.add_pareto) is joined and starred."""
    data = escaped(frame[frame["speedup"].notna() & frame["accuracy_loss"].notna()])
    fig = go.Figure()
    hover = f"%{{text}}<br>speedup {SPEEDUP.hover('x')}<br>loss {LOSS.hover('y', '.3g')}"
    markers_by_series(
        fig, data, "speedup", "accuracy_loss", hover, beyond="beyond_pareto", firm="speedup_firm"
    )
    front_traces(fig, data, "pareto", (*SPEEDUP_FRONT,))
    symbol_key(fig)
    return apply_layout(fig, "Accuracy loss against speedup", SPEEDUP.axis_title, loss_label)


def cost_vs_accuracy(frame: pd.DataFrame, cost_key: str, loss_label: str) -> go.Figure:
    """A cost (or energy) figure per item against accuracy loss, speed in the hover; starred: the
    cost/speed/accuracy Pareto front of stable measurements (cost.add_cost_pareto)."""
    x = REGISTRY[cost_key]
    data = escaped(frame[frame[cost_key].notna() & frame["accuracy_loss"].notna()])
    fig = go.Figure()
    hover = (
        f"%{{text}}<br>{x.label} {x.hover('x')}<br>loss {LOSS.hover('y', '.3g')}"
        f"<br>{THROUGHPUT.label} %{{customdata:{THROUGHPUT.spec}}} {THROUGHPUT.unit}"
    )
    markers_by_series(
        fig,
        data,
        cost_key,
        "accuracy_loss",
        hover,
        custom="throughput",
        beyond="beyond_cost_pareto",
    )
    front_traces(fig, data, "cost_pareto", (cost_key, *COST_FRONT))
    symbol_key(fig)
    title = f"Accuracy loss against {x.label}"
    return apply_layout(fig, title, x.axis_title, loss_label)


def memory_chart(frame: pd.DataFrame) -> go.Figure:
    data = _ok(frame)
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=data["label"],
            y=data["peak_rss_mb"],
            name=f"peak RSS ({RSS.unit}, {PEAK_SCOPE})",
            marker_color="#636efa",
        )
    )
    if data["gpu_memory_mb"].notna().any():
        fig.add_trace(go.Bar(x=data["label"], y=data["gpu_memory_mb"], name=GPU_MEMORY.axis_title))
    fig = apply_layout(fig, f"Memory (peak RSS over {PEAK_SCOPE})", "", RSS.unit)
    return category_ticks(fig, len(data))


def op_histogram(histogram: dict[str, int], top: int = 40) -> go.Figure:
    """How often each operator type occurs in the graph, most common first."""
    items = sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    fig = go.Figure(
        go.Bar(
            x=[count for _, count in items][::-1],
            y=[svg_text(op) for op, _ in items][::-1],
            orientation="h",
            marker_color="#00a3a3",
            hovertemplate="%{y}: %{x}<extra></extra>",
        )
    )
    fig = apply_layout(fig, "Operators", "count", "")
    # counts are whole: up to 10 Plotly would tick every 0.5; above, its steps are whole anyway
    whole = 1 if items and items[0][1] <= 10 else None
    fig.update_layout(height=max(260, 22 * len(items) + 80), xaxis_dtick=whole)
    return fig


# Compatibility statuses, best to worst, as heat-map levels and their colours (a stepped scale).
COMPAT_LEVELS = {"supported": 0, "unknown": 1, "partial": 2, "unsupported": 3}
COMPAT_COLORSCALE = [
    [0.0, "#2e7d32"],
    [0.25, "#2e7d32"],
    [0.25, "#9e9e9e"],
    [0.5, "#9e9e9e"],
    [0.5, "#f9a825"],
    [0.75, "#f9a825"],
    [0.75, "#c62828"],
    [1.0, "#c62828"],
]


def compat_heat_map(ops: pd.DataFrame, backends: list[str], labels: dict[str, str]) -> go.Figure:
    """Ops (rows) by backend (columns) from CompatMatrix.op_frame(): colour the worst status,
    number the node count. labels: backend key -> the name shown on the axis."""
    order = list(dict.fromkeys(ops["op"]))
    cells = {(row.op, row.backend): (row.status, int(row.nodes)) for row in ops.itertuples()}
    z, text, hover = [], [], []
    for op in order:
        statuses = [cells.get((op, backend), ("unknown", 0)) for backend in backends]
        z.append([COMPAT_LEVELS[status] for status, _ in statuses])
        text.append([str(nodes) for _, nodes in statuses])
        hover.append(
            [
                f"{svg_text(op)} on {labels[backend]}: {status}, {nodes} node(s)"
                for backend, (status, nodes) in zip(backends, statuses, strict=True)
            ]
        )
    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=[labels[b] for b in backends],
            y=order,
            text=text,
            texttemplate="%{text}",
            hovertext=hover,
            hoverinfo="text",
            zmin=0,
            zmax=3,
            colorscale=COMPAT_COLORSCALE,
            showscale=False,
        )
    )
    figure.update_layout(
        height=max(260, 28 * len(order) + 80),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        # y stays the op's own name (selections report it); only the drawn labels are escaped
        yaxis={
            "autorange": "reversed",
            "tickmode": "array",
            "tickvals": order,
            "ticktext": [svg_text(op) for op in order],
        },
        xaxis={"side": "top"},
    )
    return figure
