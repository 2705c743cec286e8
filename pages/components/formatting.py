"""How numbers, sizes, times and untrusted strings are written on a page.

Streamlit renders most text it is given (markdown, captions, alerts, widget labels, titles) as
GitHub-flavoured Markdown. A model name, file name, op domain, node name or worker error comes
from an upload or another machine, so it goes through plain() before it reaches any of those;
in dataframe cells, st.text and st.code it is already shown as text and needs nothing.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from backend.counts import byte_size, scaled

# Every ASCII punctuation character may be backslash-escaped in CommonMark, and an escaped one is
# always literal: no link, image, emphasis, heading, HTML, LaTeX ($), directive (:red[...]) or
# autolink (http\:\/\/, www\.) can start from it.
_ESCAPED = {ord(c): "\\" + c for c in string.punctuation}

# A missing value, in text and in every table cell (st.dataframe's placeholder= shows "None"
# otherwise).
EMPTY = "–"


def plain(text: object) -> str:
    """Untrusted text made safe for Markdown: shown as written, never as a link or image.

    Newlines become spaces so the text stays one inline run (no block structure either).
    """
    flat = " ".join(str(text).splitlines())
    return flat.translate(_ESCAPED)


def fmt_bytes(size: int | float | None) -> str:
    """A size as the CLI writes it too (backend.counts.byte_size), EMPTY where none is known."""
    return EMPTY if size is None else byte_size(size)


def fmt_count(value: int | None) -> str:
    return EMPTY if value is None else scaled(value)


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return EMPTY
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def fmt_ago(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return EMPTY
    return fmt_duration(max(0.0, (now - moment).total_seconds())) + " ago"


def fmt_shape(shape: Any) -> str:
    """[1, 3, ?] for a shape; unknown or symbolic-empty dims show as ?."""
    if isinstance(shape, list | tuple):
        return "[" + ", ".join(str(d) if d not in (None, 0, "") else "?" for d in shape) + "]"
    return json.dumps(shape)


# Streamlit's table wraps a text cell only in rows taller than 4rem (64 px; DataFrame.js of
# streamlit 1.67 sets allowWrapping when rowHeight > 4rem). Its text is 14 px at line-height 1.4
# (19.6 px a line), centred in the row: 68 px holds three lines, each further line takes 20 px.
WRAP_ROW_HEIGHT = 68
WRAP_LINE_HEIGHT = 20


def wrapped_lines(text: str, one_line: int) -> int:
    """How many lines the table's word wrap gives `text` when a line holds `one_line` characters:
    it breaks at spaces, and a word longer than a line takes as many lines as it fills."""
    lines, used = 1, 0
    for word in text.split(" "):
        if used and used + 1 + len(word) <= one_line:
            used += 1 + len(word)
            continue
        if used:
            lines += 1
        extra, used = divmod(len(word), one_line)
        if extra and not used:  # a word of exactly k lines ends its last line full
            extra, used = extra - 1, one_line
        lines += extra
    return lines


def wrapped_rows(cells: Iterable[str], one_line: int) -> int | None:
    """The row height that shows the table's longest cell whole, its text wrapped at `one_line`
    characters a line (what its column holds); None keeps one line per row. A row is as tall
    as that cell's lines: a fixed three-line row cut a fourth line ("... +5 more")."""
    lines = max((wrapped_lines(cell, one_line) for cell in cells), default=1)
    if lines == 1:
        return None
    return WRAP_ROW_HEIGHT + WRAP_LINE_HEIGHT * max(0, lines - 3)


def tensors_cell(values: list[dict[str, Any]], shown: int = 2, shapes: bool = True) -> str:
    """The first `shown` tensors (with their shapes), then how many more: a model's cell in a
    list of models (an LLM has dozens of past_key_values inputs; its page lists them all)."""
    text = ", ".join(
        f"{v.get('name', '?')}{fmt_shape(v.get('shape')) if shapes else ''}" for v in values[:shown]
    )
    more = len(values) - shown
    return f"{text} +{more} more" if more > 0 else text
