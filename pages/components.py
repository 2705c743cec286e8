"""Shared view helpers: widgets whose state lives in the URL, the copy-link control, formatting.

Every page keeps its view in st.query_params so that a copied link opens the same view in a
fresh browser. A bound widget takes its first value from the URL and writes its value back on
every run; values are short strings (lists joined by commas).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlencode

import streamlit as st

from backend.errors import UserError
from backend.models import library
from backend.specs import preset_name
from storage.repo.models import ModelRow

T = TypeVar("T")

# While something is queued or running, live parts of pages rerun this often (seconds).
LIVE_REFRESH_SECONDS = 2.0


_ROUTER_CHECKED = False


def ensure_router() -> None:
    """Make app.py (st.navigation and the shared sidebar) the router from the first request on.

    Streamlit treats a pages/ folder beside the entry file as a legacy multipage app until the
    entry file has once called st.navigation, so a first visit straight to /compare would run
    pages/compare.py without app.py. A page that finds itself run that way leaves the mode and
    reruns, which routes the request through app.py (its st.navigation clears the flag too).
    """
    global _ROUTER_CHECKED
    from streamlit.runtime.pages_manager import PagesManager

    if _ROUTER_CHECKED:
        return
    _ROUTER_CHECKED = True  # once per server process: the flag is process-wide
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


# ---- URL state ------------------------------------------------------------------------------


def url_value(key: str) -> str | None:
    value = st.query_params.get(key)
    return value if value not in (None, "") else None


def url_list(key: str) -> list[str]:
    value = url_value(key)
    return [part for part in value.split(",") if part] if value else []


def url_int(key: str) -> int | None:
    value = url_value(key)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def set_url(key: str, value: Any) -> None:
    """Write one view setting to the URL; None or an empty list removes it."""
    if isinstance(value, list | tuple | set):
        text = ",".join(str(v) for v in value)
    elif isinstance(value, bool):
        text = "1" if value else "0"
    else:
        text = "" if value is None else str(value)
    if text:
        if st.query_params.get(key) != text:
            st.query_params[key] = text
    elif key in st.query_params:
        del st.query_params[key]


def bound_selectbox(
    label: str,
    options: Sequence[T],
    key: str,
    default: T | None = None,
    format_func: Callable[[T], str] = str,
    **kwargs: Any,
) -> T | None:
    """A selectbox initialised from ?key= and written back to it."""
    options = list(options)
    if not options:
        return None
    wanted = url_value(key)
    index = next((i for i, o in enumerate(options) if str(o) == wanted), None)
    if index is None:
        index = options.index(default) if default in options else 0
    value = st.selectbox(
        label, options, index=index, key=f"url_{key}", format_func=format_func, **kwargs
    )
    set_url(key, value)
    return value


def _url_selection(key: str, options: list[T], default: Sequence[T]) -> list[T]:
    """The options ?key=a,b names when the URL has the key, else the defaults among options."""
    if url_value(key) is None:
        return [d for d in default if d in options]
    by_text = {str(o): o for o in options}
    return [by_text[v] for v in url_list(key) if v in by_text]


def bound_multiselect(
    label: str,
    options: Sequence[T],
    key: str,
    default: Sequence[T] = (),
    format_func: Callable[[T], str] = str,
    **kwargs: Any,
) -> list[T]:
    """A multiselect initialised from ?key=a,b and written back to it."""
    options = list(options)
    initial = _url_selection(key, options, default)
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
    """Multi-select pills (chart choices) kept in the URL."""
    options = list(options)
    initial = _url_selection(key, options, default)
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


def copy_link() -> None:
    """A popover with this view's link; its code block has a copy button."""
    with st.popover("🔗 Copy link", help="A link that opens this exact view, for teammates"):
        st.caption("Anyone who can reach this dashboard sees the same view from this link.")
        st.code(share_url(), language=None, wrap_lines=True)


def page_header(title: str, caption: str | None = None) -> None:
    ensure_router()
    left, right = st.columns([5, 1], vertical_alignment="bottom")
    with left:
        st.title(title)
        if caption:
            st.caption(caption)
    with right:
        copy_link()


def work_in_progress() -> bool:
    """True while any job is queued or running: the signal for pages to refresh themselves."""
    from backend.queue.jobs import job_counts
    from storage.states import JobState

    counts = job_counts()
    return bool(counts.get(JobState.QUEUED.value) or counts.get(JobState.RUNNING.value))


def refresh_every(active: bool) -> float | None:
    """The run_every of a live fragment: refresh while work runs, stop once nothing does."""
    return LIVE_REFRESH_SECONDS if active else None


def rerun_if_changed(was_active: bool) -> None:
    """Inside a live fragment: a full rerun when work started or stopped, to re-decide refresh."""
    if work_in_progress() != was_active:
        st.rerun()


# ---- common pickers -------------------------------------------------------------------------


def model_picker(models: list[ModelRow], key: str = "model") -> ModelRow | None:
    """The model the page is about, bound to ?model=<id>."""
    if not models:
        return None
    by_id = {m.id: m for m in models}
    chosen = bound_selectbox(
        "Model",
        list(by_id),
        key,
        format_func=lambda mid: f"{by_id[mid].name} (#{mid}, {by_id[mid].format})",
    )
    return by_id.get(chosen) if chosen is not None else None


def no_models_yet(action: str) -> None:
    st.info(f"No models yet. Upload one on the Models page to {action}.", icon="📦")
    st.page_link("pages/models.py", label="Upload a model", icon="⬆️")


def load_models() -> list[ModelRow]:
    return library.list_models()


def show_error(exc: UserError) -> None:
    st.error(str(exc), icon="🚫")


# ---- formatting -----------------------------------------------------------------------------


def fmt_bytes(size: int | float | None) -> str:
    if size is None:
        return "–"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def fmt_count(value: int | None) -> str:
    if value is None:
        return "–"
    for threshold, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= threshold:
            return f"{value / threshold:.1f}{suffix}"
    return str(value)


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def fmt_ago(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "–"
    return fmt_duration(max(0.0, (now - moment).total_seconds())) + " ago"


def fmt_shape(shape: Any) -> str:
    if isinstance(shape, list | tuple):
        return "[" + ", ".join(str(d) if d not in (None, 0, "") else "?" for d in shape) + "]"
    return json.dumps(shape)


# ---- sweeps in the URL ----------------------------------------------------------------------


def spec_query(model_id: int, spec: Any, job_id: int | None = None) -> dict[str, str]:
    """Optimize-page URL parameters that reproduce a sweep, for "run again with changes"."""
    preset = preset_name(spec.measure) or "standard"
    params = {
        "model": str(model_id),
        "precisions": ",".join(p.value for p in spec.precisions),
        "backend": spec.backend,
        "providers": ",".join(spec.providers),
        "batches": ",".join(str(b) for b in spec.batch_sizes),
        "shapes": "fixed" if spec.fixed_shapes else "dynamic",
        "opt": spec.optimization_level,
        "threads": str(spec.intra_op_threads),
        "simplify": "1" if spec.simplify else "0",
        "measure": preset,
    }
    if spec.symbolic_dims:
        params["dims"] = ",".join(f"{k}:{v}" for k, v in spec.symbolic_dims)
    if job_id is not None:
        params["from_job"] = str(job_id)
    return params
