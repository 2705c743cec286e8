"""The marks of a chart's points: one marker trace per series, an unstable measurement drawn
hollow, a speedup that is not firm a hollow diamond, and the legend entries saying so; apart
from charts.py so that each module stays readable."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from backend.reporting.style import series_colors

UNSTABLE_MARK = " (unstable: hollow, treat with care)"
BEYOND_MARK = (
    "<br>measured beyond the Pareto front, left off it as its figures are not firm: re-run it"
)
NOT_FIRM_MARK = (
    " (speedup not firm: hollow diamond; its median-call speedup and throughput ratio disagree, "
    "or its baseline was unstable)"
)
# legend-only entries that say what the hollow marks mean, added where such a point is drawn
KEY_UNSTABLE = "hollow circle: measurement unstable"
KEY_NOT_FIRM = "hollow diamond: speedup not firm"


def markers_by_series(
    fig: go.Figure,
    data: pd.DataFrame,
    x: str,
    y: str,
    hover: str,
    custom: str | None = None,
    beyond: str | None = None,
    firm: str | None = None,
) -> None:
    """One marker trace per series (names and labels already escaped), coloured in order;
    `custom` names a column the hover reads as %{customdata}; `beyond` a column marking the
    unstable points that measured beyond the front (front.py), which their hover says; `firm`
    a column whose False draws a stable point as a hollow diamond (a speedup not firm)."""
    colors = series_colors(list(dict.fromkeys(data["series"])))
    for name, group in data.groupby("series", sort=False):
        symbols, labels = _stability_marks(group, firm)
        if beyond is not None and beyond in group:
            marks = group[beyond].fillna(False).astype(bool).tolist()
            labels = [f"{t}{BEYOND_MARK if b else ''}" for t, b in zip(labels, marks, strict=True)]
        fig.add_trace(
            go.Scatter(
                x=group[x],
                y=group[y],
                mode="markers",
                name=name,
                legendgroup=name,
                showlegend=False,  # its key below: a legend draws a trace's first point's mark
                marker={"color": colors[name], "size": 10, "symbol": symbols},
                text=labels,
                customdata=group[custom] if custom else None,
                hovertemplate=f"{hover}<extra></extra>",
            )
        )
        fig.add_trace(series_key(name, colors[name]))


def series_key(name: str, color: str) -> go.Scatter:
    """A series' legend entry: a plain filled circle, whatever its points' marks (a series whose
    first point was unstable showed the hollow circle that keys "measurement unstable")."""
    # in the series' group: a click on it hides the series' points too
    return _legend_only(name, {"color": color, "symbol": "circle"}, group=name)


def _legend_only(name: str, marker: dict[str, str], group: str | None = None) -> go.Scatter:
    """A legend entry with no point of its own."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        name=name,
        legendgroup=group,
        text=[name],  # as every marker trace has: readers iterate it
        marker={**marker, "size": 10},
        hoverinfo="skip",
    )


def _stability_marks(group: pd.DataFrame, firm: str | None) -> tuple[list[str], list[str]]:
    """Marker symbols and labels: an unstable measurement is drawn hollow, a stable one whose
    speedup is not firm (column `firm` False) a hollow diamond, and each says so in its label:
    a point to treat with care rather than a firm figure."""
    unstable = group["stable"].eq(False).tolist() if "stable" in group else [False] * len(group)
    shaky = [False] * len(group)
    if firm is not None and firm in group:
        shaky = (~group[firm].fillna(True).astype(bool)).tolist()
    symbols, labels = [], []
    for text, moved, loose in zip(group["label"], unstable, shaky, strict=True):
        symbols.append("circle-open" if moved else "diamond-open" if loose else "circle")
        labels.append(f"{text}{UNSTABLE_MARK if moved else NOT_FIRM_MARK if loose else ''}")
    return symbols, labels


def symbol_key(fig: go.Figure) -> None:
    """Legend entries (no data) for the hollow marks drawn in `fig`, so the legend says what a
    hollow circle and a hollow diamond mean."""
    drawn = {s for t in fig.data if isinstance(t.marker.symbol, tuple) for s in t.marker.symbol}
    for symbol, name in (("circle-open", KEY_UNSTABLE), ("diamond-open", KEY_NOT_FIRM)):
        if symbol in drawn:
            fig.add_trace(_legend_only(name, {"symbol": symbol, "color": "grey"}))
