"""The house style every chart shares (sweeps, serving, generation), so pages look alike."""

from __future__ import annotations

import html
import textwrap

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

PALETTE = qualitative.Plotly + qualitative.D3 + qualitative.Safe


def series_colors(series: list[str]) -> dict[str, str]:
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(series)}


def rgba(hex_color: str, alpha: float) -> str:
    hex_color = hex_color.lstrip("#")
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


# Characters on a line of a chart's title: at a 1100 px window a half-width column showed 44
# characters of "Latency per call (p50; band and whisker to |" before cutting the rest off.
TITLE_WIDTH = 38
# The horizontal legend's top, in plot heights below the plot: at -0.2 it sat on the x-axis
# title (tick labels and title take about 60 px under a plot about 250 px high at 1100 px).
LEGEND_Y = -0.35
# The legend below pushes the bottom margin by its height, which shrank the plot (and so the
# legend's offset, a share of the plot's height) until the legend sat on the axis title: the
# figure grows by a row per legend entry (a half-width column shows one a row) and keeps a plot
# about PLOT_HEIGHT / 1.35 px high, the 1.35 for the gap LEGEND_Y leaves.
MIN_HEIGHT = 450  # Plotly's own default
PLOT_HEIGHT = 300
LEGEND_ROW = 26
MANY_TICKS = 6  # more category labels than this stand upright: at -30 degrees 16 overlapped


def apply_layout(fig: go.Figure, title: str, x: str, y: str, log_x: bool = False) -> go.Figure:
    """The house style every x/y chart shares (serving charts too), so pages look alike."""
    lines = wrapped_title(title)
    top = 28 + 22 * len(lines)
    fig.update_layout(
        height=max(MIN_HEIGHT, PLOT_HEIGHT + top + LEGEND_ROW * legend_entries(fig)),
        title="<br>".join(lines),
        xaxis_title=x,
        yaxis_title=y,
        hovermode="closest",
        legend={"orientation": "h", "yanchor": "top", "y": LEGEND_Y},
        margin={"l": 60, "r": 20, "t": top, "b": 40},
        template="plotly_white",
    )
    if log_x:  # ticked at the sizes drawn only: left alone, a log axis adds 0.125, 0.25...
        ticks = sorted({v for t in fig.data if t.x is not None for v in t.x if v == v})
        text = [f"{v:g}" for v in ticks]
        fig.update_xaxes(type="log", tickmode="array", tickvals=ticks, ticktext=text)
    return fig


def legend_entries(fig: go.Figure) -> int:
    """How many entries the legend shows: named traces not hidden from it, one a legend group."""
    shown = [t for t in fig.data if t.showlegend is not False and t.name]
    return len({t.legendgroup or t.name for t in shown})


def category_ticks(fig: go.Figure, count: int) -> go.Figure:
    """Category labels (configuration names) on the x axis: slanted when few, upright when many,
    so that 16 long labels no longer overlap; the margin grows to hold them."""
    if count <= MANY_TICKS:
        return fig.update_xaxes(tickangle=-30, automargin=True)
    # every label (Plotly hid every other one of 16), upright and a little smaller
    return fig.update_xaxes(tickangle=-90, automargin=True, dtick=1, tickfont={"size": 10})


def wrapped_title(title: str) -> list[str]:
    """A title's lines: Plotly never wraps one, and a half-width chart cut a long title off."""
    return [
        line
        for part in title.split("<br>")
        for line in textwrap.wrap(part, TITLE_WIDTH, break_long_words=False) or [""]
    ]


def svg_text(text: str) -> str:
    """An untrusted name (model, op type, domain) for Plotly, whose text reads <a href> tags."""
    return html.escape(str(text), quote=False)


def escaped(frame: pd.DataFrame) -> pd.DataFrame:
    """Series and labels (they hold model names from uploads) escaped for Plotly's text markup."""
    return frame.assign(
        **{col: frame[col].map(svg_text) for col in ("series", "label") if col in frame}
    )
