"""The Graph page's overlay picker and variant diff (computed in backend/graphview; this only
asks, caches and draws). The view (overlay, result, backend, node) lives in the URL."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import streamlit as st

from backend.compat import matrix_for_model
from backend.counts import counted
from backend.errors import UserError
from backend.graphview import overlay as ov
from backend.graphview import views
from backend.graphview.structure import GraphStructure, read_structure
from backend.models import derived, library
from backend.models.costing import cost_in_child
from backend.reporting import costview
from pages.components.formatting import EMPTY, plain
from pages.components.url_state import bound_selectbox
from pages.components.widgets import show_error

DIFF_PER_ROW = 4  # the variant diff's counts in the side column: seven in a row cut their names


@st.cache_data(show_spinner=False, max_entries=32)
def structure(sha256: str) -> GraphStructure:
    """Node names and tensors only: external data is never read (structure.py). A large file's
    weightless copy (graphview/skeleton.py, made before the overlay) has the same nodes and is
    read in a blink, instead of parsing the whole file in a child again."""
    copy = derived.skeleton_path(sha256)
    return read_structure(copy if copy.is_file() else library.artifact_path(sha256))


@st.cache_data(show_spinner=False, max_entries=8)
def _matrix(model_id: int) -> dict[str, Any]:
    return matrix_for_model(model_id).to_dict()


def _legend(overlay: ov.Overlay) -> None:
    """The legend beside the viewer too, every label escaped as plain text."""
    st.caption(
        f"**{plain(overlay.title)}**: "
        + "; ".join(f"{plain(label)}" for _fill, label in overlay.legend)
        + f" ({counted(len(overlay.marks), 'node')} painted)"
    )
    if overlay.note:
        st.caption(plain(overlay.note))


def pick_overlay(model_id: int, sha256: str, filename: str) -> ov.Overlay | None:
    """The overlay the URL names (?overlay=, ?result=, ?backend=) for the uploaded graph; where
    it cannot be drawn, one sentence says why and the plain graph is shown."""
    kinds = list(ov.KINDS)
    kind = bound_selectbox("Overlay", kinds, "overlay", format_func=ov.KINDS.get)
    if not kind:
        return None
    try:
        return _overlay(kind, model_id, sha256, filename)
    except UserError as exc:
        show_error(exc)
        return None


def _overlay(kind: str, model_id: int, sha256: str, filename: str) -> ov.Overlay | None:
    graph = structure(sha256)
    if kind in ov.NEEDS_RESULT:
        results = views.results_for(model_id, kind)
        if not results:
            st.info(
                "No stored result of this model has the data for this overlay: "
                + (
                    "run an INT8 static configuration with accuracy samples."
                    if kind == "sqnr"
                    else "run a job with per-node profiling on (Optimize, 'Profile each node')."
                )
            )
            return None
        by_id = {r.id: r for r in results}
        chosen = bound_selectbox(
            "Result", list(by_id), "result", format_func=lambda i: views.result_label(by_id[i])
        )
        overlay = views.result_overlay(kind, graph, by_id[chosen])
    elif kind == "compat":
        with st.spinner("Reading the compatibility matrix (built in a child once per model)..."):
            from backend.compat import CompatMatrix

            matrix = CompatMatrix.from_dict(_matrix(model_id))
        backend = bound_selectbox("Backend", matrix.backends, "backend")
        overlay = ov.compat_overlay(graph, matrix, backend)
    else:
        dims = str(st.session_state.get("cost_dims") or "")  # the Compute cost section's
        with st.spinner("Counting in a limited child process..."):
            cost = cost_in_child(
                library.artifact_path(sha256), 1, costview.parse_dims(dims), filename
            )
        overlay = ov.cost_overlay(graph, cost, kind)
    _legend(overlay)
    return overlay


def variant_diff(model_id: int, artifact: Any) -> ov.Overlay | None:
    """The optimized variant against the upload: counts, the unified list, and its overlay."""
    meta = artifact.meta or {}
    try:
        view = views.variant_view(
            library.onnx_path(model_id),
            library.artifact_path(artifact.sha256),
            meta.get("job_id"),
            str(meta.get("config_key") or ""),
        )
    except UserError as exc:
        show_error(exc)
        return None
    diff = view.diff
    counts = diff.counts()
    st.markdown(
        f"**Against the upload**: {counted(diff.uploaded_nodes, 'node')} uploaded, "
        f"{diff.variant_nodes} in this variant."
    )
    kinds = list(counts.items())  # four to a row: seven in the side column cut "Q/DQ inse..."
    for start in range(0, len(kinds), DIFF_PER_ROW):
        for column, (kind, count) in zip(st.columns(DIFF_PER_ROW), kinds[start:], strict=False):
            column.metric(kind, count)
    rows = diff.rows(view.profile)
    if view.result is not None and view.profile is not None:
        job = view.result.job_id
        for row in rows:
            link = f"jobs?job={job}&profile={quote(view.result.config_key, safe='')}"
            row["profile"] = link if row["time share"] else None
        st.caption(
            f"Changed nodes ranked by their share of the profiled time of result "
            f"{view.result.id} (job {job}); each link opens that configuration's per-node profile "
            "on the Jobs page."
        )
    with st.expander(f"Changed nodes ({len(rows)}), hottest first", expanded=False):
        _changed_table(rows)
    overlay = diff.overlay(str(meta.get("config_key") or artifact.filename))
    _legend(overlay)
    return overlay


def _changed_table(rows: list[dict[str, Any]]) -> None:
    st.dataframe(
        rows,
        hide_index=True,
        key="variant_diff",
        column_config={
            "time share": st.column_config.NumberColumn("time share", format="percent"),
            "profile": st.column_config.LinkColumn("profile", display_text="profile rows"),
        },
        placeholder=EMPTY,
    )
