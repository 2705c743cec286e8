"""Plotly figures for serving: throughput vs p99 per configuration, queue/compute, batch sizes,
and the latency distribution of load points from their stored requests."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

from backend.reporting.style import apply_layout
from backend.serving.types import LoadPoint

PALETTE = qualitative.Plotly


def throughput_vs_p99(curves: dict[str, list[LoadPoint]], slo_p99_ms: float) -> go.Figure:
    """One line per configuration (predicted dashed, measured solid) and the bound as a line; a
    measured point whose load generator fell behind is a lone hollow marker off the line: its
    latency is the client's, not the server's."""
    fig = go.Figure()
    for index, (label, points) in enumerate(curves.items()):
        color = PALETTE[index % len(PALETTE)]
        for measured in (False, True):
            chosen = [p for p in points if p.predicted != measured]
            saturated = [p for p in chosen if measured and p.generator_saturated]
            chosen = [p for p in chosen if p not in saturated]
            if chosen:
                fig.add_trace(
                    go.Scatter(
                        x=[p.achieved_rps for p in chosen],
                        y=[p.latency.p99 for p in chosen],
                        mode="lines+markers",
                        name=f"{label} ({'measured' if measured else 'predicted'})",
                        line={"color": color, "dash": "solid" if measured else "dash"},
                        hovertemplate=HOVER,
                    )
                )
            if saturated:
                fig.add_trace(_saturated_trace(label, saturated, color))
    fig.add_hline(
        y=slo_p99_ms,
        line={"color": "crimson", "dash": "dot"},
        annotation_text=f"p99 bound {slo_p99_ms:g} ms",
    )
    return apply_layout(fig, "Throughput vs p99 latency", "requests per second", "p99 latency (ms)")


HOVER = "%{x:.0f} req/s, p99 %{y:.2f} ms<extra>%{fullData.name}</extra>"


def _saturated_trace(label: str, points: list[LoadPoint], color: str) -> go.Scatter:
    return go.Scatter(
        x=[p.achieved_rps for p in points],
        y=[p.latency.p99 for p in points],
        mode="markers",
        marker={"color": color, "symbol": "x-open", "size": 10},
        name=f"{label} (client saturated: not the server's)",
        hovertemplate=HOVER,
    )


def queue_compute_split(points: dict[str, LoadPoint]) -> go.Figure:
    """Where a request's time goes at the quoted rate: waiting in the queue vs computing."""
    labels = list(points)
    fig = go.Figure(
        [
            go.Bar(name="queue", x=labels, y=[points[n].queue_ms for n in labels]),
            go.Bar(name="compute", x=labels, y=[points[n].compute_ms for n in labels]),
        ]
    )
    fig = apply_layout(fig, "Queue vs compute (mean per request)", "configuration", "milliseconds")
    # the legend above the bars: below, the slanted configuration names ran over it
    legend = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1.0}
    fig.update_layout(barmode="stack", legend=legend, margin_t=80)
    return fig.update_xaxes(automargin=True)


def batch_histogram(point: LoadPoint, label: str) -> go.Figure:
    """How many executions ran at each batch size the server formed."""
    sizes = sorted(point.batch_histogram)
    fig = go.Figure(go.Bar(x=[str(s) for s in sizes], y=[point.batch_histogram[s] for s in sizes]))
    kind = "predicted" if point.predicted else "measured"
    # the configuration on a line of its own: on one line a half-width chart cut it off
    title = f"Batch sizes formed ({kind}):<br>{label}"
    fig = apply_layout(fig, title, "batch size", "executions")
    return fig.update_layout(margin_t=80)


MAX_DRAWN = 2000  # steps drawn per CDF: a point of 500,000 requests drew slowly in the browser


def latency_cdf(samples: dict[str, np.ndarray]) -> go.Figure:
    """Per load point, the share of its requests answered within each latency: the empirical
    CDF of its samples (at most MAX_DRAWN of its steps, the slowest request always among them),
    with the 99% line, where a curve crosses it is the point's p99."""
    fig = go.Figure()
    for index, (label, latency_ms) in enumerate(samples.items()):
        ordered = np.sort(latency_ms)
        steps = np.unique(np.linspace(0, ordered.size - 1, min(ordered.size, MAX_DRAWN)).round())
        at = steps.astype(int)
        fig.add_trace(
            go.Scatter(
                x=ordered[at].tolist(),
                y=(100 * (at + 1) / ordered.size).tolist(),
                mode="lines",
                line={"color": PALETTE[index % len(PALETTE)], "shape": "hv"},
                name=f"{label} ({ordered.size:,} requests)",
                hovertemplate="%{y:.2f}% within %{x:.2f} ms<extra>%{fullData.name}</extra>",
            )
        )
    fig.add_hline(y=99, line={"color": "grey", "dash": "dot"}, annotation_text="p99")
    fig = apply_layout(
        fig, "Latency distribution of every request", "latency (ms)", "requests within (%)"
    )
    return fig.update_yaxes(range=[0, 100.5])
