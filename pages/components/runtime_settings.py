"""The Optimize page's settings that one runtime or provider adds: OpenVINO's hint and streams,
the CUDA and TensorRT expanders (widgets only).

Each returns the values its widgets describe; what those values allow is checked by the options
dataclasses themselves (backend/cudaoptions.py, backend/trtoptions.py) and the sweep. Kept apart
from pages/optimize.py (over a hundred lines of widgets) so the page reads as its flow.
"""

from __future__ import annotations

import enum
from typing import Any

import streamlit as st

from backend.knobs import default_of, knobs, labelled, text_codec
from backend.specs import (
    CudaOptions,
    IoMode,
    OpenVinoOptions,
    OrtOptions,
    PerformanceHint,
    SweepSpec,
    TrtOptions,
)
from backend.trtoptions import DEFAULT_ENGINE_FOLDER, DEFAULT_TIMING_FOLDER
from pages.components.url_state import bound_count, bound_selectbox, set_url


def declared_widgets(group: type, old: Any) -> dict[str, Any]:
    """A widget per knob of `group` that names one (its `widget` key), labelled and explained
    by the declaration and starting from `old` (the link's or the reopened sweep's): toggles for
    flags, a select box for a choice. A knob with its own link key keeps the link in step."""
    values: dict[str, Any] = {}
    for f, k, kind in knobs(group):
        if not k.widget:
            continue
        now, words = getattr(old, f.name), k.help or None
        if kind is bool:
            values[f.name] = st.toggle(k.label, now, key=k.widget, help=words)
        elif isinstance(kind, type) and issubclass(kind, enum.Enum):
            options = [m.value for m in kind]
            values[f.name] = st.selectbox(
                k.label, options, index=options.index(now.value), key=k.widget, help=words
            )
        else:
            values[f.name] = st.text_input(k.label, str(now), key=k.widget, help=words)
        if k.url:
            changed = values[f.name] != default_of(f)
            set_url(k.url, text_codec(kind).dump(values[f.name]) if changed else None)
    return values


def onnxruntime_settings(prefill: SweepSpec) -> OrtOptions:
    """ONNX Runtime's own session options, drawn from their declarations (backend/
    runtimeoptions.py), starting from the link's or the reopened sweep's."""
    if not any(k.widget for _, k, _ in knobs(OrtOptions)):
        return prefill.onnxruntime
    with st.expander("ONNX Runtime session settings"):
        return OrtOptions(**declared_widgets(OrtOptions, prefill.onnxruntime))


def openvino_settings(prefill: SweepSpec) -> OpenVinoOptions:
    """OpenVINO's performance hint and streams, bound to ?hint= and ?streams=; the page offers
    them only when OpenVINO is picked."""
    title, words = labelled(OpenVinoOptions, "performance_hint")
    hint = bound_selectbox(
        title,
        [h.value for h in PerformanceHint],
        "hint",
        default=prefill.openvino.performance_hint.value,
        help=words,
    )
    streams = bound_count(labelled(OpenVinoOptions, "streams")[0], "streams", 64)
    return OpenVinoOptions(performance_hint=hint or PerformanceHint.LATENCY, streams=streams)


def cuda_settings(prefill: SweepSpec) -> tuple[tuple[IoMode, ...], CudaOptions, bool]:
    """The CUDA provider's own knobs (timing modes, options, knee search), starting from the
    reopened sweep's; the page offers them only when cuda is picked, and the spec refuses the
    combinations it cannot run, with the reason."""
    with st.expander("CUDA provider settings", expanded=True):
        modes = st.multiselect(
            labelled(SweepSpec, "io_modes")[0],
            [m.value for m in IoMode],
            default=[m.value for m in prefill.io_modes],
            format_func=lambda v: IoMode(v).label,
            key="io_modes",
            help="End to end: host arrays in and out, as a client sees it. Device-resident: "
            "inputs and outputs already on the GPU (IOBinding). Both: the copy share is shown.",
        )
        cuda = CudaOptions(**declared_widgets(CudaOptions, prefill.cuda))
        knee = st.toggle(
            "Find the knee: batches 1, 2, 4 ... until throughput gains stay under 5%",
            prefill.find_knee,
            key="find_knee",
        )
    return tuple(IoMode(m) for m in modes), cuda, knee


def trt_settings(old: TrtOptions) -> TrtOptions:
    """The tensorrt provider's options, starting from the reopened sweep's (`old`); the page
    offers them only when it is picked (so only where it is available), and TrtOptions refuses
    what it cannot run, with the reason."""
    with st.expander("TensorRT provider settings", expanded=True):
        cols = st.columns(2)
        fp16 = cols[0].toggle(f"{_label('fp16')} (trt_fp16_enable)", old.fp16, key="trt_fp16")
        int8 = cols[1].toggle(f"{_label('int8')} (trt_int8_enable)", old.int8, key="trt_int8")
        calibration_table = st.text_input(
            _label("int8_calibration_table"),
            old.int8_calibration_table,
            key="trt_table",
            help=labelled(TrtOptions, "int8_calibration_table")[1],
        )
        timing = cols[0].toggle(_label("timing_cache"), old.timing_cache, key="trt_timing")
        engine = cols[1].toggle(_label("engine_cache"), old.engine_cache, key="trt_engine")
        folders = st.columns(2)
        timing_path = folders[0].text_input(
            _label("timing_cache_path"),
            old.timing_cache_path,
            key="trt_timing_path",
            placeholder=DEFAULT_TIMING_FOLDER,
            help=labelled(TrtOptions, "timing_cache_path")[1],
        )
        engine_path = folders[1].text_input(
            _label("engine_cache_path"),
            old.engine_cache_path,
            key="trt_engine_path",
            placeholder=DEFAULT_ENGINE_FOLDER,
            help=labelled(TrtOptions, "engine_cache_path")[1],
        )
        workspace = folders[0].number_input(
            _label("max_workspace_size"),
            0,
            1 << 20,
            old.max_workspace_size >> 20,
            key="trt_workspace",
        )
        level = folders[1].slider(
            _label("builder_optimization_level"),
            0,
            5,
            old.builder_optimization_level,
            key="trt_level",
            help=labelled(TrtOptions, "builder_optimization_level")[1],
        )
    return TrtOptions(
        fp16=fp16,
        int8=int8,
        int8_calibration_table=calibration_table.strip(),
        timing_cache=timing,
        timing_cache_path=timing_path.strip(),
        engine_cache=engine,
        engine_cache_path=engine_path.strip(),
        max_workspace_size=int(workspace) << 20,
        builder_optimization_level=level,
    )


def _label(name: str) -> str:
    return labelled(TrtOptions, name)[0]
