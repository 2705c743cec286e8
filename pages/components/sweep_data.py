"""The Optimize page's own pickers: INT8 static's calibration data, the evaluation set and the
measurement preset.

Widgets only: each says where the data comes from ("stored" for the reopened sweep's file, an
upload, random inputs or none) and hands back the file uploaded, if any; backend/forms/
optimize.py decides what that means for the sweep and stores the upload on submit. Kept apart
from pages/optimize.py so the page reads as its flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from backend.forms.optimize import Upload
from backend.knobs.links import CUSTOM_MEASURE, field_query
from backend.models import library
from backend.specs import MEASURE_PRESETS, MeasureSettings, SweepSpec, preset_name
from pages.components.formatting import plain
from pages.components.url_state import set_url


def calibration_data(start: Mapping[str, Any], model_id: int) -> tuple[str, UploadedFile | None]:
    """Where INT8 static's calibration data comes from ("stored", "random" or "npz") and the
    uploaded .npz; `start` is the link's sweep (its stored file is offered, by the name it was
    uploaded under, when it has one)."""
    stored = start.get("calibration_sha256")
    kept = ["stored"] if stored else []
    source = st.radio(
        "INT8 static calibration data",
        kept + ["random", "npz"],
        format_func=lambda v: {
            "stored": "The calibration .npz of the sweep you reopened: "
            + plain(library.npz_filename(model_id, stored, "calibration") or "its stored file"),
            "random": "Random inputs",
            "npz": "Upload a .npz",
        }[v],
        horizontal=True,
        key="calibration_source",
    )
    if source != "npz":
        return source, None
    uploaded = st.file_uploader(
        "Calibration .npz: one array per input name, samples along the first axis",
        type=["npz"],
        key="calibration_file",
    )
    return source, uploaded


def measurement(start: Mapping[str, Any]) -> MeasureSettings:
    """The measurement a preset names, or the reopened sweep's own settings ("custom", offered
    only when the link's are not a preset); kept in the link as the measure knob declares it."""
    linked = start.get("measure", MEASURE_PRESETS["standard"])
    custom = [] if preset_name(linked) else [CUSTOM_MEASURE]
    preset = st.selectbox(
        "Measurement",
        list(MEASURE_PRESETS) + custom,
        index=(list(MEASURE_PRESETS) + custom).index(preset_name(linked) or CUSTOM_MEASURE),
        format_func=lambda v: {
            "quick": "Quick: a few seconds per configuration, for a first look",
            "standard": "Standard: 3 stable windows within 10%",
            "thorough": "Thorough: 5 stable windows within 5%",
            CUSTOM_MEASURE: "As the sweep you reopened measured (custom settings)",
        }[v],
        key="url_measure",
    )
    settings = MEASURE_PRESETS.get(preset, linked)
    for key, text in field_query(SweepSpec, "measure", settings).items():
        set_url(key, text)
    return settings


def evaluation_data(start: Mapping[str, Any], model_id: int) -> tuple[str, UploadedFile | None]:
    """Where the evaluation set comes from ("stored", "none" or "npz") and the uploaded .npz."""
    stored = start.get("evaluation_sha256")
    kept = ["stored"] if stored else []
    source = st.radio(
        "Evaluation set (task accuracy)",
        kept + ["none", "npz"],
        format_func=lambda v: {
            "stored": "The evaluation .npz of the sweep you reopened: "
            + plain(library.npz_filename(model_id, stored, "evaluation") or "its stored file"),
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
