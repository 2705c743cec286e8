"""Graph: the Netron viewer served by the dashboard, the operator histogram and the I/O table.

The model reaches the viewer as a short-lived URL of Streamlit's own media store, registered for
this session only and named with a per-session secret: only someone looking at this page can load
it, it is never written to static/, and it is dropped once the session leaves the page.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import streamlit as st
from streamlit import runtime

from backend import viewer
from backend.auth.roles import Permission
from backend.errors import UserError
from backend.graphview import skeleton
from backend.models import library
from backend.models.cost import ModelCost
from backend.models.costing import cost_in_child
from backend.reporting import charts, costview
from pages.components import graphoverlay
from pages.components.formatting import EMPTY, fmt_bytes, fmt_shape, plain
from pages.components.gate import require_access
from pages.components.url_state import bound_selectbox, url_value
from pages.components.widgets import model_picker, no_models_yet, page_header, show_error

require_access(Permission.BROWSE)  # before anything is drawn or read: components/gate.py

page_header("Graph", "The model's graph in Netron, with its operators and inputs/outputs.")


@st.cache_resource(show_spinner=False)
def _viewer_ready() -> str:
    return str(viewer.prepare_viewer())


@st.cache_data(show_spinner=False, max_entries=32)
def _counted(sha256: str, batch: int, dims: str, shown: str) -> ModelCost:
    """Counted in a limited child (costing.py); cached per model file and dimensions."""
    return cost_in_child(library.artifact_path(sha256), batch, costview.parse_dims(dims), shown)


def _cost(sha256: str, batch: int, dims: str, shown: str) -> ModelCost:
    """_counted, with a refusal remembered for this session so a rerun starts no new child."""
    refused = st.session_state.setdefault("_cost_refused", {})
    key = (sha256, batch, dims)
    if key in refused:
        raise UserError(refused[key])
    try:
        return _counted(sha256, batch, dims, shown)
    except UserError as exc:
        refused[key] = str(exc)
        raise


@st.cache_data(show_spinner=False, max_entries=64)
def _histogram(sha256: str, large: bool) -> dict[str, int]:
    """Counted from the weightless copy when the file is large, so no weights enter this process."""
    path = library.artifact_path(sha256)
    return viewer.op_histogram(skeleton.skeleton_of(path, sha256).path if large else path)


def _private_overlay_url(data: bytes) -> str:
    """An overlay's JSON in this session's media store, named like the model (unguessable)."""
    salt = st.session_state.setdefault("_viewer_secret", secrets.token_hex(16))
    if not runtime.exists():
        return ""
    return runtime.get_instance().media_file_mgr.add(
        data, "application/json", "optiboard.graph.overlay", f"{salt}-overlay.json"
    )


def _private_model_url(path: Path, filename: str) -> str:
    """Register the model file in this session's media store under an unguessable name."""
    salt = st.session_state.setdefault("_viewer_secret", secrets.token_hex(16))
    if not runtime.exists():  # bare `python pages/graph.py`: there is no server to serve it
        return ""
    return runtime.get_instance().media_file_mgr.add(
        str(path), "application/octet-stream", "optiboard.graph.viewer", f"{salt}-{filename}"
    )


def _focus(sha256: str, asked: str | None) -> str | None:
    """What Netron's node= selects for the link's node= (a name the cost table, Compatibility
    and profiles show, a node's own name, or the tensor a Jobs link names it by), said under
    its shown name; a name that matches nothing is said so and selects nothing."""
    if not asked:
        return None
    found = graphoverlay.structure(sha256).find(asked)
    if found is None:
        st.caption(
            f"No node of this graph is named {plain(asked)} or produces a tensor of that name, "
            "so Netron selects none."
        )
        return None
    if found.body:
        st.caption(
            f"Node {plain(found.name)} is inside {plain(found.body)}: Netron selects "
            f"{plain(found.holder)}, the node holding that body, once the graph is drawn."
        )
    else:
        st.caption(f"Netron selects node {plain(found.name)} once the graph is drawn.")
    return found.focus


models = library.list_models()
if not models:
    no_models_yet("see its graph")
    st.stop()

model = model_picker(models)
assert model is not None
onnx_files = [a for a in library.list_artifacts(model.id) if a.filename.endswith(".onnx")]
if not onnx_files:
    st.error("This model has no ONNX file to draw; re-upload it on the Models page.")
    st.stop()
by_id = {a.id: a for a in onnx_files}
kind_order = {"converted": 0, "original": 1, "optimized": 2}
ordered = sorted(onnx_files, key=lambda a: (kind_order.get(a.kind, 3), a.id))
artifact_id = bound_selectbox(
    "Graph",
    [a.id for a in ordered],
    "artifact",
    format_func=lambda aid: (
        f"{by_id[aid].kind}: {by_id[aid].filename}"
        + (f" ({by_id[aid].meta.get('config_key')})" if by_id[aid].meta.get("config_key") else "")
    ),
)
artifact = by_id[artifact_id]

graph_col, side_col = st.columns([3, 2])
with graph_col:
    try:
        _viewer_ready()
        shown_path, weightless = library.artifact_path(artifact.sha256), None
        if artifact.size_bytes > viewer.max_viewer_bytes():
            with st.spinner("Making a copy of the graph without its weights (a limited child)..."):
                weightless = skeleton.skeleton_of(shown_path, artifact.sha256)
            shown_path = weightless.path
        if weightless is not None and weightless.size_bytes > viewer.max_viewer_bytes():
            st.info(
                f"Even without its weights this graph is {fmt_bytes(weightless.size_bytes)}, "
                f"more than a browser tab can hold comfortably "
                f"({fmt_bytes(viewer.max_viewer_bytes())}); download it from the Models page "
                "and open it in the Netron desktop app."
            )
        else:
            media_url = _private_model_url(shown_path, artifact.filename)
            if artifact.kind == "optimized":
                overlay = graphoverlay.variant_diff(model.id, artifact)
            else:
                overlay = graphoverlay.pick_overlay(model.id, artifact.sha256, artifact.filename)
            overlay_url = (
                _private_overlay_url(overlay.to_json(graphoverlay.structure(artifact.sha256)))
                if overlay is not None
                else None
            )
            focus = _focus(artifact.sha256, url_value("node"))  # e.g. a hottest-node link's
            st.iframe(
                viewer.viewer_url(media_url, artifact.filename, node=focus, overlay=overlay_url),
                height=720,
                alt=f"Netron graph of {model.name}",
            )
            if weightless is not None:
                st.caption(
                    f"Weights not loaded: this {fmt_bytes(artifact.size_bytes)} graph is shown "
                    f"from a {fmt_bytes(weightless.size_bytes)} copy that keeps its nodes, "
                    "attributes, tensor names, types and shapes."
                )
            st.caption(
                "Netron viewer, served by this dashboard (works offline). Scroll to zoom, "
                "click a node for its attributes."
            )
    except UserError as exc:
        show_error(exc)
    except viewer.ViewerPatchError as exc:
        st.error(f"The graph viewer could not be prepared: {plain(exc)}")

if artifact.kind in ("original", "converted"):  # the upload's own, read when it was stored
    graph_inputs, graph_outputs = model.inputs, model.outputs
else:  # a variant's (a fixed batch, a cast input): its own file's
    shown_structure = graphoverlay.structure(artifact.sha256)
    graph_inputs, graph_outputs = list(shown_structure.inputs), list(shown_structure.outputs)

with side_col:
    histogram = (
        model.op_histogram
        if artifact.kind in ("original", "converted") and model.op_histogram
        else _histogram(artifact.sha256, artifact.size_bytes > viewer.max_viewer_bytes())
    )
    if histogram:
        st.plotly_chart(charts.op_histogram(histogram), key="ops")
    else:
        st.caption("No operators recorded for this graph.")
    st.markdown("**Inputs and outputs**")
    st.dataframe(
        [
            {
                "role": role,
                "name": value.get("name"),
                "dtype": value.get("dtype"),
                "shape": fmt_shape(value.get("shape")),
            }
            for role, values in (("input", graph_inputs), ("output", graph_outputs))
            for value in values
        ],
        hide_index=True,
        placeholder=EMPTY,
    )
    st.page_link(
        "pages/optimize.py", label="Optimize this model", icon="🛠️", query_params={"model": model.id}
    )

st.subheader("Compute cost")
st.caption(
    "Counted from the graph's static shapes: two FLOPs per multiply-accumulate in Conv, MatMul, "
    "Gemm, Einsum and attention, one per element in elementwise operators."
)
batch_col, dims_col = st.columns(2)
fixed = costview.fixed_batch(graph_inputs)  # a fixed-batch graph: the input would do nothing
cost_batch = batch_col.number_input(
    "Batch size",
    min_value=1,
    max_value=65536,
    value=fixed or 1,
    disabled=fixed is not None,
    key=f"cost_batch_{fixed}",  # a fixed graph's own widget: its value is the graph's batch
    help=f"This graph's inputs fix its batch at {fixed}." if fixed else None,
)
cost_dims = dims_col.text_input(
    "Other dimensions", placeholder=costview.dims_example(graph_inputs), key="cost_dims"
)
try:
    needed = costview.dims_still_needed(graph_inputs, cost_dims)
    if needed is None:
        with st.spinner("Counting in a limited child process..."):
            cost = _cost(artifact.sha256, int(cost_batch), cost_dims, artifact.filename)
except UserError as exc:
    show_error(exc)
else:
    if needed is not None:  # a prompt, not an error: nothing was asked yet
        st.info(plain(needed))
        example = costview.dims_example(graph_inputs)  # in the graph's own names
        st.button(  # one click, not four values typed from the placeholder
            f"Count with {plain(example)}",  # the names are the upload's: text, not Markdown
            key="cost_dims_example",
            on_click=lambda: st.session_state.update(cost_dims=example),
        )
        st.stop()
    for column, (label, value) in zip(st.columns(5), costview.totals(cost).items(), strict=True):
        column.metric(label, value)
    if note := costview.uncounted_note(cost):
        st.caption(note)
    st.dataframe(
        costview.node_rows(cost),
        hide_index=True,
        column_config={"share": st.column_config.ProgressColumn("share", format="percent")},
        placeholder=EMPTY,
    )
