"""Widgets every page shares: the header with its copy-link control, the model picker, errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import pandas as pd
import streamlit as st

from backend.auth.roles import Via
from backend.errors import UserError
from backend.records import ModelRow
from pages.access import current
from pages.components.formatting import plain
from pages.components.router import ensure_router
from pages.components.url_state import bound_selectbox, share_url

_LINK_SLOT = "_copy_link_slot"


def who_sees_the_link() -> str:
    """Who opens this view from its link: with access control on, only a signed-in account may
    (its role decides what it sees), unless the view itself came through a signed link, whose
    token the address carries."""
    principal = current()
    if principal.via == Via.OPEN:  # OPTIBOARD_AUTH=off
        return "Anyone who can reach this dashboard sees the same view from this link."
    if principal.via == Via.LINK:
        return (
            "This address carries the read-only link you opened: anyone with it sees these jobs "
            "until that link expires."
        )
    return (
        "A teammate who opens this link signs in first (unless already signed in), then sees the "
        "same view as far as their role allows."
    )


def copy_link() -> None:
    """A popover whose code block (it has a copy button) app.py fills once the page has run."""
    with st.popover("🔗 Copy link", help="A link that opens this exact view, for teammates"):
        st.caption(who_sees_the_link())
        st.session_state[_LINK_SLOT] = st.empty()


def fill_copy_link() -> None:
    """Write this view's link after the page ran: widgets below the header write to the URL too."""
    slot = st.session_state.pop(_LINK_SLOT, None)
    if slot is not None:
        slot.code(share_url(), language=None, wrap_lines=True)


def page_header(title: str, caption: str | None = None) -> None:
    """Title, caption and copy link; also makes sure app.py routes this request."""
    ensure_router()
    # A row, not st.columns([5, 1]): a sixth of the page was narrower than the button at 1100 px
    # ("Cop..."); here the title takes what the button, as wide as its label, leaves.
    with st.container(horizontal=True, vertical_alignment="bottom"):
        with st.container():
            st.title(title)
            if caption:
                st.caption(caption)
        copy_link()


def metric_row(metrics: Sequence[tuple[str, Any]]) -> None:
    """Metrics side by side, each as wide as its value and wrapping onto a new line where the
    page is narrow: in equal columns a value wider than its column was cut ("succee..." at 1100
    px)."""
    with st.container(horizontal=True, wrap=True, horizontal_alignment="distribute"):
        for label, value in metrics:
            st.metric(label, value, width="content")


def model_label(model: ModelRow) -> str:
    """A model as a picker shows it (option labels are plain text, never Markdown)."""
    return f"{model.name} (#{model.id}, {model.format})"


def model_picker(models: list[ModelRow], key: str = "model") -> ModelRow | None:
    """The model the page is about, bound to ?model=<id>."""
    if not models:
        return None
    by_id = {m.id: m for m in models}
    chosen = bound_selectbox(
        "Model", list(by_id), key, format_func=lambda mid: model_label(by_id[mid]), what="model"
    )
    return by_id.get(chosen) if chosen is not None else None


def no_models_yet(action: str) -> None:
    st.info(f"No models yet. Upload one on the Models page to {action}.", icon="📦")
    st.page_link("pages/models.py", label="Upload a model", icon="⬆️")


def show_error(exc: UserError) -> None:
    """A UserError as users see it; its sentence may quote a file or model name, so plain text."""
    st.error(plain(exc), icon="🚫")


def job_label(meta: pd.DataFrame) -> Callable[[int], str]:
    """How job pickers name a job ("#3 mlp · label"), from a frame indexed by job_id with model
    and label columns; stable while results arrive, so the widget keeps its choice."""

    def label(job_id: int) -> str:
        name = f"#{job_id} {meta.at[job_id, 'model']}"
        return name + (f" · {meta.at[job_id, 'label']}" if meta.at[job_id, "label"] else "")

    return label


def nothing_yet(message: str, icon: str) -> NoReturn:
    """A page with nothing to show yet: say why, point to the Optimize page, stop the run."""
    st.info(message, icon=icon)
    st.page_link("pages/optimize.py", label="Optimize a model", icon="🛠️")
    st.stop()


def job_queued(job_id: int, what: str, compare: dict[str, Any] | None = None) -> None:
    """A submitted job's confirmation (`what` says what it queued) and two links: follow it on
    Jobs, and compare its results as they arrive (`compare`: more of Compare's link)."""
    st.success(f"Queued job {job_id} with {what}.", icon="✅")
    links = st.columns(2)
    links[0].page_link(
        "pages/jobs.py", label=f"Follow job {job_id}", icon="⏱️", query_params={"job": job_id}
    )
    links[1].page_link(
        "pages/compare.py",
        label="Compare its results as they arrive",
        icon="📊",
        query_params={**(compare or {}), "jobs": job_id},
    )


WHY_FITS = 60  # characters a table's "why / error" cell shows before it cuts the sentence


def why_in_full(rows: list[tuple[str, str, bool]], key: str) -> None:
    """Under a table of configurations: each why or error the table's cell cut, whole. Rows are
    (label, text, failed); open at once when one failed, as its error is what the user needs."""
    long = [(label, text, failed) for label, text, failed in rows if len(text) > WHY_FITS]
    if not long:
        return
    with st.expander(
        f"Why / error in full ({len(long)} cut in the table)",
        expanded=any(failed for _, _, failed in long),
        key=key,
    ):
        for label, text, failed in long:
            st.markdown(f"{'🚫 ' if failed else ''}**{plain(label)}**: {plain(text)}")
