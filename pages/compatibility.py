"""Compatibility: which backend can run each node of a model, why, and where ORT really put it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from backend.auth.roles import Permission
from backend.compat import BACKEND_LABELS, CompatMatrix, matrix_for_model
from backend.compat import export as compat_export
from backend.compat.placement import described
from backend.counts import counted
from backend.errors import UserError
from backend.models import library
from backend.reporting import charts
from pages.components.formatting import EMPTY, plain
from pages.components.gate import require_access
from pages.components.url_state import bound_selectbox, set_url, url_value
from pages.components.widgets import model_picker, page_header, show_error

require_access(Permission.BROWSE)  # before anything is drawn or read: components/gate.py


@st.cache_data(show_spinner=False, max_entries=16)
def load_matrix(model_id: int, sha256: str, refresh_token: int) -> dict:
    """The matrix as a plain dict (cacheable); sha256 keys the cache to the model's content."""
    return matrix_for_model(model_id, refresh=refresh_token > 0).to_dict()


page_header(
    "Compatibility",
    "Every node against every backend: supported, partial, unsupported or unknown, with the "
    "reason and its source. Real placement from ONNX Runtime sessions sits beside the prediction.",
)

models = library.list_models()
if not models:
    st.info(
        "No models yet. Upload an ONNX model or a SavedModel on the Models page to see which "
        "backends can run its operators.",
        icon="📦",
    )
    st.stop()

model = model_picker(models)
if model is None:
    st.stop()

refresh = st.button("Recompute", help="Rebuild the matrix instead of using the cached one")
try:
    with st.spinner("Reading kernels and opening real sessions…"):
        data = load_matrix(model.id, model.sha256, int(refresh))
except UserError as exc:
    show_error(exc)
    st.stop()

matrix = CompatMatrix.from_dict(data)
summaries = compat_export.summary(matrix)

st.subheader("Per backend")
PER_ROW = 3  # six backends in one row cut their names ("ONNX Runtime Tens...")
rows = [st.columns(PER_ROW) for _ in range(0, len(summaries), PER_ROW)]
for index, s in enumerate(summaries):
    with rows[index // PER_ROW][index % PER_ROW]:
        if not s.applicable:
            st.metric(s.label, "n/a")
            st.caption(plain(s.note))
            continue
        st.metric(
            s.label,
            f"{s.share:.0%}",
            help=f"{s.supported + s.partial} of {counted(s.nodes, 'node')}",
        )
        parts = [f"{s.unsupported} unsupported", f"{s.partial} partial"]
        if s.unknown:
            parts.append(f"{s.unknown} unknown")
        if s.backend in ("ort-cuda", "ort-tensorrt") or s.fallbacks:
            parts.append(counted(s.fallbacks, "falls back", "fall back"))
        st.caption(", ".join(parts))
        if s.placement is not None:
            failed = "Real session failed" if s.placement.get("error") else "Real placement"
            st.caption(f"{failed}: {plain(described(s.placement))}")

suggestions = [(s.label, text) for s in summaries for text in s.suggestions]
if suggestions:
    with st.expander(f"Suggested fixes ({len(suggestions)})", expanded=True):
        for label, text in suggestions:
            st.markdown(f"- **{plain(label)}**: {plain(text)}")

frame = compat_export.to_frame(matrix)
ops = compat_export.op_frame(matrix)

problems_only = st.toggle(
    "Problem ops only",
    value=url_value("problems") == "1",
    help="Hide ops every backend supports",
    key="problems_toggle",
)
set_url("problems", problems_only)
if problems_only and not ops.empty:
    bad = set(ops.loc[ops["status"] != "supported", "op"])
    ops = ops[ops["op"].isin(bad)]

# the backend leads each label, in three columns wide enough for it: "Graph coloured for ONNX
# Runtime ..." in four was cut before the part that tells CPU, CUDA and TensorRT apart
graph_links = st.columns(min(len(matrix.backends), 3) or 1)
for index, name in enumerate(matrix.backends):
    graph_links[index % len(graph_links)].page_link(
        "pages/graph.py",
        label=f"{BACKEND_LABELS.get(name, name)}: graph",
        icon="🕸️",
        help="The Graph page, each node coloured by this backend's support for it",
        query_params={"model": model.id, "overlay": "compat", "backend": name},
    )

st.subheader("Heat map")
st.caption("Ops by backend; the number is the node count, the colour the worst status.")
if ops.empty:
    st.success("Every op of this model is supported by every backend.")
    selected_op = None
else:
    chart = st.plotly_chart(
        charts.compat_heat_map(ops, matrix.backends, BACKEND_LABELS),
        width="stretch",
        on_select="rerun",
        selection_mode="points",
        key="compat_heatmap",
    )
    points = (chart or {}).get("selection", {}).get("points", []) if chart else []
    if points:
        set_url("op", points[0].get("y"))
    op_names = list(dict.fromkeys(ops["op"]))
    selected_op = bound_selectbox("Nodes behind op", op_names, "op")

if selected_op is not None:
    labels = {b: BACKEND_LABELS[b] for b in matrix.backends}
    backend = bound_selectbox("Backend", list(labels), "backend", format_func=lambda b: labels[b])
    op_type = selected_op.split("::")[-1]
    domain = selected_op.split("::")[0] if "::" in selected_op else "ai.onnx"
    rows = frame[
        (frame["op_type"] == op_type) & (frame["domain"] == domain) & (frame["backend"] == backend)
    ]
    shown = rows[
        ["node", "graph", "op_version", "input_types", "output_types", "status", "reason", "source"]
    ].copy()
    if rows["placed_on"].astype(bool).any():
        shown.insert(6, "placed_on (real)", rows["placed_on"])
    where = "main: the model's top graph; else the If/Loop/Scan body holding it, as Graph names it"
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        placeholder=EMPTY,
        column_config={"graph": st.column_config.TextColumn("graph", help=where)},
    )

with st.expander("Data sources"):
    st.dataframe(pd.DataFrame(matrix.sources), hide_index=True, width="stretch", placeholder=EMPTY)
    st.caption(f"Runtime: {plain(matrix.runtime)}")

left, right = st.columns(2)
left.download_button(
    "Download CSV",
    compat_export.to_csv(matrix),
    file_name=f"{model.name}-compat.csv",
    mime="text/csv",
    key="download_compat_csv",
    on_click="ignore",  # a download reruns nothing: the other button's file stays as it is
)
right.download_button(
    "Download JSON",
    compat_export.to_json(matrix),
    file_name=f"{model.name}-compat.json",
    mime="application/json",
    key="download_compat_json",
    on_click="ignore",
)
