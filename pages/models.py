"""Models: upload through the browser, the library with metadata, downloads and delete."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

import settings
from backend.auth.audit import Action
from backend.auth.roles import Permission
from backend.errors import UserError
from backend.models import library, origin
from backend.models.accepted import ACCEPTED_UPLOADS
from backend.models.ingest import AlreadyInLibrary
from backend.records import ArtifactRow, ModelRow
from pages.access import cannot, guarded
from pages.components.formatting import (
    EMPTY,
    fmt_bytes,
    fmt_count,
    fmt_shape,
    plain,
    tensors_cell,
    wrapped_rows,
)
from pages.components.gate import require_access
from pages.components.url_state import set_url
from pages.components.widgets import metric_row, model_picker, page_header, show_error

require_access(Permission.BROWSE)  # before anything is drawn or read: components/gate.py

COPY_CHUNK = 8 << 20
# characters a "large" (400 px) text column holds on one line before its text wraps: 48 of
# Source Sans at 14 px (6.8 px a character in tensor names and shapes; capitals take 7.9). The
# library's inputs column and the shape column of the Inputs and Outputs tables are both large
# (a half-width table shows only part of it at 1100 px: the text wraps at the column's width).
INPUTS_ONE_LINE = 48
SHAPE_ONE_LINE = INPUTS_ONE_LINE
KIND_LABELS = {
    "original": "Original upload",
    "converted": "Converted to ONNX",
    "optimized": "Optimized",
    "conversion_log": "Conversion log",
    "calibration": "Calibration data",
}

page_header("Models", "Upload models and manage the library.")


def _select(model_id: int) -> None:
    """Open a model below: the link and the picker's own state (popping only the link left
    the browser's selectbox showing, and sending back, the model chosen before)."""
    set_url("model", model_id)
    st.session_state["url_model"] = model_id


def _ingest(upload: UploadedFile, name: str | None, copy: bool) -> ModelRow:
    """Hand the upload to the library chunk by chunk, with a progress bar while it is saved."""
    progress = st.progress(0.0, text="Saving the upload…")
    total = max(upload.size, 1)

    def saved(done: int) -> None:
        text = "Saving the upload…" if done < total else "Checking and inspecting the model…"
        progress.progress(min(done / total, 1.0), text=text)

    upload.seek(0)
    try:
        return library.ingest_upload(
            iter(lambda: upload.read(COPY_CHUNK), b""),
            upload.name,
            name=name,
            on_saved=saved,
            copy=copy,
        )
    finally:
        progress.empty()


if why := cannot("upload a model", Permission.UPLOAD):
    st.caption(why)  # the upload box is not drawn: say why, as Optimize and Serve do
else:
    # keyed, so choosing a file (a rerun) does not fold the panel over the file and its button
    with st.expander("⬆️ Upload a model", expanded=not library.list_models(), key="upload_panel"):
        max_upload_mb = settings.MAX_UPLOAD_MB.get()
        st.markdown(
            f"Accepted: {ACCEPTED_UPLOADS}. A SavedModel is converted with tf2onnx, a .pt2 "
            "(from `torch.export.save`) with torch.onnx and checked against the program; a "
            "Hugging Face folder (.safetensors weights, tokenizer.json) or a GenAI folder is "
            f"for the generation benchmark. Up to {max_upload_mb} MB "
            "(`server.maxUploadSize` in `.streamlit/config.toml`)."
        )
        with st.form("upload", clear_on_submit=True, border=False):
            upload = st.file_uploader(  # any type: ingest's sentence says why one is refused
                "Model file", max_upload_size=max_upload_mb, key="upload_file"
            )
            name = st.text_input("Name (optional)", placeholder="defaults to the file name")
            copy = st.checkbox(
                "Add even if already in the library",
                key="upload_copy",
                help="The same file (same sha256) is refused, naming the model it already is; "
                "tick this for a second model of it.",
            )
            submitted = st.form_submit_button("Add to library", type="primary")
        if submitted:
            if upload is None:
                st.error("Choose a file first: drag it onto the box above or use its button.")
            else:
                try:
                    with (
                        guarded(Action.UPLOAD, upload.name),
                        st.spinner(f"Ingesting {plain(upload.name)}…"),
                    ):
                        added = _ingest(upload, name.strip(), copy)
                except AlreadyInLibrary as exc:  # nothing went wrong: open the model it is
                    _select(exc.model_id)
                    st.info(plain(exc.said('tick "Add even if already in the library" above')))
                except UserError as exc:
                    show_error(exc)
                else:
                    _select(added.id)
                    size = fmt_bytes(added.size_bytes)
                    st.success(f"Added {plain(added.name)} ({added.format}, {size}).")
                    for warning in added.warnings:
                        st.warning(plain(warning))

models = library.list_models()
if not models:
    st.info("The library is empty. Upload a model above to inspect, optimize and compare it.")
    st.stop()

st.subheader(f"Library ({len(models)})")
library_rows = [
    {
        "id": m.id,
        "name": m.name,
        "format": m.format,
        "opset": m.opset,
        "size": fmt_bytes(m.size_bytes),
        "parameters": fmt_count(m.parameter_count),
        "nodes": m.node_count,
        "inputs": tensors_cell(m.inputs),
        "outputs": tensors_cell(m.outputs, shown=3, shapes=False),
        "origin": origin.origin_short(m),
        "added (UTC)": m.created_at.strftime("%Y-%m-%d %H:%M"),
    }
    for m in models
]
st.dataframe(
    library_rows,
    hide_index=True,
    placeholder=EMPTY,
    column_config={"inputs": st.column_config.TextColumn("inputs", width="large")},
    row_height=wrapped_rows((r["inputs"] for r in library_rows), one_line=INPUTS_ONE_LINE),
)

model = model_picker(models)
assert model is not None

# each as wide as its value ("pytorch-exported" was cut in a fifth, "569.6 KB" at 1100 px)
metric_row(
    [
        ("Format", model.format),
        ("Opset", model.opset if model.opset is not None else EMPTY),
        ("Size", fmt_bytes(model.size_bytes)),
        ("Parameters", fmt_count(model.parameter_count)),
        ("Nodes", model.node_count),
    ]
)
if made := origin.origin_sentence(model):
    st.caption(plain(made))
for warning in model.warnings:
    st.warning(plain(warning))


def _tensors(title: str, values: list[dict]) -> None:
    """A model's inputs or outputs, each shape written out in full: the rows are as tall as
    the longest shape's lines (formatting.wrapped_rows) when one is longer than its column."""
    rows = [
        {"name": v.get("name"), "dtype": v.get("dtype"), "shape": fmt_shape(v.get("shape"))}
        for v in values
    ]
    st.markdown(f"**{title}**")
    st.dataframe(
        rows,
        hide_index=True,
        placeholder=EMPTY,
        column_config={"shape": st.column_config.TextColumn("shape", width="large")},
        row_height=wrapped_rows((r["shape"] for r in rows), one_line=SHAPE_ONE_LINE),
    )


left, right = st.columns(2)
with left:
    _tensors("Inputs", model.inputs)
with right:
    _tensors("Outputs", model.outputs)

links = st.columns(3)
links[0].page_link("pages/graph.py", label="View graph", icon="🕸️", query_params={"model": model.id})
links[1].page_link(
    "pages/optimize.py", label="Optimize", icon="🛠️", query_params={"model": model.id}
)
links[2].page_link("pages/jobs.py", label="Jobs", icon="⏱️", query_params={"model": model.id})


def _reader(sha256: str) -> Callable[[], bytes]:
    """Read the file only when the user clicks Download, not on every rerun."""
    return lambda: library.artifact_path(sha256).read_bytes()


st.markdown("**Artifacts**")
artifacts: list[ArtifactRow] = library.list_artifacts(model.id)
if not artifacts:
    st.caption("No stored files for this model.")
for art in artifacts:
    row = st.columns([2, 4, 1, 1], vertical_alignment="center")
    row[0].text(KIND_LABELS.get(art.kind, art.kind))
    detail = art.meta.get("config_key") if isinstance(art.meta, dict) else None
    row[1].text(art.filename + (f" · {detail}" if detail else ""))
    row[2].text(fmt_bytes(art.size_bytes))
    row[3].download_button(
        "Download",
        data=_reader(art.sha256),
        file_name=art.filename,
        mime="application/octet-stream",
        key=f"dl_{art.id}",
        icon="⬇️",
        on_click="ignore",  # a rerun would drop the other buttons' deferred files (compare.py)
    )
for line in library.export_check(artifacts):
    st.caption(plain(line))

if why := cannot("delete a model", Permission.DELETE):
    st.caption(why)
else:
    with st.expander("🗑️ Delete this model"):
        st.markdown(
            f"Deletes **{plain(model.name)}** with its jobs, results and stored files. "
            "This cannot be undone."
        )
        if kept := origin.kept_on_delete(model):
            st.markdown(plain(kept))
        sure = st.checkbox(f"Yes, delete {plain(model.name)}", key=f"confirm_delete_{model.id}")
        if st.button("Delete model", disabled=not sure, type="primary", key="delete_model"):
            try:
                with guarded(Action.DELETE, f"model {model.id} {model.name}"):
                    library.delete_model(model.id)
            except UserError as exc:
                show_error(exc)
            else:
                set_url("model", None)
                st.session_state.pop("url_model", None)
                st.toast(f"Deleted {plain(model.name)}.")
                st.rerun()
