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


TITLE_WIDTH = 60  # characters on a line of a chart's title: what a half-width column shows


def apply_layout(fig: go.Figure, title: str, x: str, y: str, log_x: bool = False) -> go.Figure:
    """The house style every x/y chart shares (serving charts too), so pages look alike."""
    lines = wrapped_title(title)
    fig.update_layout(
        title="<br>".join(lines),
        xaxis_title=x,
        yaxis_title=y,
        hovermode="closest",
        legend={"orientation": "h", "yanchor": "top", "y": -0.2},
        margin={"l": 60, "r": 20, "t": 28 + 22 * len(lines), "b": 40},
        template="plotly_white",
    )
    if log_x:  # ticked at the sizes drawn only: left alone, a log axis adds 0.125, 0.25...
        ticks = sorted({v for t in fig.data if t.x is not None for v in t.x if v == v})
        text = [f"{v:g}" for v in ticks]
        fig.update_xaxes(type="log", tickmode="array", tickvals=ticks, ticktext=text)
    return fig


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
