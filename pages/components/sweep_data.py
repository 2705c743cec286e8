"""The Optimize page's data pickers: INT8 static's calibration data and the evaluation set.

Widgets only: each says where the data comes from ("stored" for the reopened sweep's file, an
upload, random inputs or none) and hands back the file uploaded, if any; backend/forms/
optimize.py decides what that means for the sweep and stores the upload on submit. Kept apart
from pages/optimize.py so the page reads as its flow.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from backend.forms.optimize import Upload
from backend.models import library
from backend.specs import SweepSpec
from pages.components.formatting import plain
from pages.components.url_state import set_url


def calibration_data(prefill: SweepSpec) -> tuple[str, UploadedFile | None, int]:
    """Where INT8 static's calibration data comes from ("stored", "random" or "npz"), the
    uploaded .npz, and how many random samples (bound to ?cal_samples=)."""
    kept = ["stored"] if prefill.calibration_sha256 else []
    source = st.radio(
        "INT8 static calibration data",
        kept + ["random", "npz"],
        format_func=lambda v: {
            "stored": "The .npz of the sweep you reopened",
            "random": "Random inputs",
            "npz": "Upload a .npz",
        }[v],
        horizontal=True,
        key="calibration_source",
    )
    samples = prefill.calibration_samples
    if source == "npz":
        uploaded = st.file_uploader(
            "Calibration .npz: one array per input name, samples along the first axis",
            type=["npz"],
            key="calibration_file",
        )
        return source, uploaded, samples
    samples = int(
        st.number_input("Random calibration samples", min_value=1, max_value=1024, value=samples)
    )
    set_url("cal_samples", samples)
    return source, None, samples


def evaluation_data(prefill: SweepSpec, model_id: int) -> tuple[str, UploadedFile | None]:
    """Where the evaluation set comes from ("stored", "none" or "npz") and the uploaded .npz."""
    kept = ["stored"] if prefill.evaluation_sha256 else []
    source = st.radio(
        "Evaluation set (task accuracy)",
        kept + ["none", "npz"],
        format_func=lambda v: {
            "stored": "The evaluation .npz of the sweep you reopened: "
            + plain(library.npz_filename(model_id, prefill.evaluation_sha256, "evaluation")),
            "none": "None: agreement with FP32 on random inputs only",
            "npz": "Upload an evaluation .npz",
        }[v],
        horizontal=True,
        key="evaluation_source",
        help="Kept apart from the calibration data: the same file is refused as both.",
    )
    if source != "npz":
        return source, None
    uploaded = st.file_uploader(
        "Evaluation .npz: one array per input name, samples along the first axis, and "
        "optionally `labels` (one integer class per sample) for top-1 accuracy",
        type=["npz"],
        key="evaluation_file",
    )
    return source, uploaded


def as_upload(uploaded: UploadedFile | None) -> Upload | None:
    """The bytes and name of an uploaded file, read when the sweep is submitted."""
    return Upload(uploaded.getvalue(), uploaded.name) if uploaded is not None else None
