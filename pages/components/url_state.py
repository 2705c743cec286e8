"""Widgets whose state lives in the URL, so a copied link opens the same view in a fresh browser.

A bound widget takes its first value from st.query_params and writes its value back on every
run; values are short strings (lists joined by commas).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlencode

import streamlit as st

from backend.commas import comma_list
from pages.components.formatting import plain

T = TypeVar("T")


def url_value(key: str) -> str | None:
    value = st.query_params.get(key)
    return value if value not in (None, "") else None


def url_list(key: str) -> list[str]:
    return comma_list(url_value(key))


def url_ids(key: str) -> tuple[int, ...]:
    """The ids ?key=3,4 names (jobs on Compare); anything that is not a whole number is dropped."""
    return tuple(int(v) for v in url_list(key) if v.isdigit())


def url_int(key: str) -> int | None:
    """?key= as a whole number; None when absent or when it is not one (see link_note)."""
    value = url_value(key)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def link_note(sentence: str) -> None:
    """What a link asked for that this view cannot show, and what it shows instead: one
    sentence, so a link to something deleted or mistyped never opens something else silently."""
    st.warning(plain(sentence), icon="🔗")


def not_a_number(key: str, what: str) -> str | None:
    """The sentence for ?key= holding something that is not a whole number (None: it is one, or
    absent); `what` names the thing (a job, a study) the number picks."""
    value = url_value(key)
    if value is None or url_int(key) is not None:
        return None
    return f"The link's {key}={value[:40]!r} is not a {what} number (a whole number, e.g. 7)"


def url_text(value: Any) -> str:
    """How one value is written to the URL: lists joined by commas, booleans as 1/0."""
    if isinstance(value, list | tuple | set):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "1" if value else "0"
    return "" if value is None else str(value)


def set_url(key: str, value: Any) -> None:
    """Write one view setting to the URL; None or an empty list removes it."""
    text = url_text(value)
    if text:
        if st.query_params.get(key) != text:
            st.query_params[key] = text
    elif key in st.query_params:
        del st.query_params[key]


def url_selection(key: str, options: Sequence[T], default: Sequence[T]) -> list[T]:
    """The options ?key=a,b names when the URL has the key, else the defaults among options."""
    if url_value(key) is None:
        return [d for d in default if d in options]
    by_text = {str(o): o for o in options}
    return [by_text[v] for v in url_list(key) if v in by_text]


def bound_selectbox(
    label: str,
    options: Sequence[T],
    key: str,
    default: T | None = None,
    format_func: Callable[[T], str] = str,
    what: str | None = None,
    **kwargs: Any,
) -> T | None:
    """A selectbox initialised from ?key= and written back to it; a link value that names no
    option is said in one sentence (`what` the option is, else the label) before the default
    is shown."""
    options = list(options)
    if not options:
        return None
    wanted = url_value(key)
    index = next((i for i, o in enumerate(options) if str(o) == wanted), None)
    missing = wanted is not None and index is None
    if index is None:
        index = options.index(default) if default in options else 0
    if st.session_state.get(f"url_{key}") in options:  # the widget's own state wins anyway
        kwargs.pop("index", None)
        missing = False  # the user picked since: the link's value is no longer asked for
    else:
        kwargs["index"] = index
    if missing:  # a deleted or mistyped id: say so before showing something else
        link_note(
            f"The link's {key}={str(wanted)[:40]} names no {what or label.lower()} here; "
            f"showing {format_func(options[index])} instead."
        )
    value = st.selectbox(label, options, key=f"url_{key}", format_func=format_func, **kwargs)
    set_url(key, value)
    return value


def bound_multiselect(
    label: str,
    options: Sequence[T],
    key: str,
    default: Sequence[T] = (),
    format_func: Callable[[T], str] = str,
    what: str | None = None,
    note: bool = True,
    **kwargs: Any,
) -> list[T]:
    """A multiselect initialised from ?key=a,b and written back to it; link values that name
    no option are said in one sentence (`what` the options are, else the label), unless the
    page says it itself (`note` False)."""
    options = list(options)
    initial = url_selection(key, options, default)
    unknown = [v for v in url_list(key) if v not in {str(o) for o in options}]
    if note and unknown and f"url_{key}" not in st.session_state:
        held = ", ".join(v[:40] for v in unknown[:5])
        link_note(
            f"The link's {key}={url_value(key)} holds {held}, not among the choices for "
            f"{what or label} here; "
            + ("the rest is picked." if initial else "nothing is picked instead.")
        )
    value = st.multiselect(
        label, options, default=initial, key=f"url_{key}", format_func=format_func, **kwargs
    )
    set_url(key, value)
    return value


def bound_pills(
    label: str,
    options: Sequence[T],
    key: str,
    default: Sequence[T] = (),
    format_func: Callable[[T], str] = str,
) -> list[T]:
    """Multi-select pills (chart choices) kept in the URL; none chosen is written as "none"."""
    options = list(options)
    initial = url_selection(key, options, default)
    value = st.pills(
        label,
        options,
        selection_mode="multi",
        default=initial,
        key=f"url_{key}",
        format_func=format_func,
    )
    set_url(key, list(value or []) or "none")
    return list(value or [])


def share_url() -> str:
    """The full address of this view, query string included."""
    base = st.context.url or ""
    query = urlencode({k: st.query_params.get(k) for k in st.query_params.to_dict()})
    return f"{base}?{query}" if query else base


def bound_number(
    label: str, key: str, default: float, min_value: float, max_value: float, **kwargs: Any
) -> float:
    """A number input initialised from ?key= (when it is a number in range) and written back."""
    try:
        initial = float(url_value(key) or default)
    except ValueError:
        initial = default
    if not min_value <= initial <= max_value:
        initial = default
    value = st.number_input(label, min_value, max_value, initial, key=f"url_{key}", **kwargs)
    set_url(key, f"{value:g}")
    return float(value)
