"""Shared view pieces for pages: URL state, live refresh, formatting, widgets and the router.

No domain code lives here: a helper that needs to know about jobs, models or sweeps calls one
backend function and renders its answer. Pages import from the submodules; the names below are
re-exported for code written against the former single pages/components.py.
"""

from pages.components.formatting import (
    fmt_ago,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_shape,
    plain,
)
from pages.components.live import (
    LIVE_REFRESH_SECONDS,
    refresh_every,
    rerun_if_changed,
    work_in_progress,
)
from pages.components.router import ensure_router
from pages.components.url_state import (
    bound_multiselect,
    bound_pills,
    bound_selectbox,
    set_url,
    share_url,
    url_int,
    url_list,
    url_value,
)
from pages.components.widgets import copy_link, model_picker, no_models_yet, page_header, show_error

__all__ = [
    "LIVE_REFRESH_SECONDS",
    "bound_multiselect",
    "bound_pills",
    "bound_selectbox",
    "copy_link",
    "ensure_router",
    "fmt_ago",
    "fmt_bytes",
    "fmt_count",
    "fmt_duration",
    "fmt_shape",
    "model_picker",
    "no_models_yet",
    "page_header",
    "plain",
    "refresh_every",
    "rerun_if_changed",
    "set_url",
    "share_url",
    "show_error",
    "url_int",
    "url_list",
    "url_value",
    "work_in_progress",
]
