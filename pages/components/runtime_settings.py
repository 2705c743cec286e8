"""The Optimize page's settings that one runtime or provider adds: OpenVINO's hint and streams,
the CUDA and TensorRT expanders (widgets only).

Each returns the values its widgets describe; what those values allow is checked by the options
dataclasses themselves (backend/cudaoptions.py, backend/trtoptions.py) and the sweep. Kept apart
from pages/optimize.py (over a hundred lines of widgets) so the page reads as its flow.
"""

from __future__ import annotations

import streamlit as st

from backend.specs import (
    ConvAlgoSearch,
    CudaOptions,
    IoMode,
    PerformanceHint,
    SweepSpec,
    TrtOptions,
)
from backend.trtoptions import DEFAULT_ENGINE_FOLDER, DEFAULT_TIMING_FOLDER
from pages.components.url_state import bound_count, bound_selectbox


def openvino_settings(prefill: SweepSpec) -> tuple[str | None, int]:
    """OpenVINO's performance hint and streams, bound to ?hint= and ?streams=; the page offers
    them only when OpenVINO is picked."""
    hint = bound_selectbox(
        "OpenVINO performance hint",
        [h.value for h in PerformanceHint],
        "hint",
        default=prefill.performance_hint.value,
        help="Latency: one request as fast as possible; throughput: most requests per second.",
    )
    streams = bound_count("OpenVINO streams (0 = as the hint chooses)", "streams", 64)
    return hint, streams


def cuda_settings(prefill: SweepSpec) -> tuple[tuple[IoMode, ...], CudaOptions, bool]:
    """The CUDA provider's own knobs (timing modes, options, knee search), starting from the
    reopened sweep's; the page offers them only when cuda is picked, and the spec refuses the
    combinations it cannot run, with the reason."""
    with st.expander("CUDA provider settings", expanded=True):
        modes = st.multiselect(
            "What the timing includes",
            [m.value for m in IoMode],
            default=[m.value for m in prefill.io_modes],
            format_func=lambda v: IoMode(v).label,
            key="io_modes",
            help="End to end: host arrays in and out, as a client sees it. Device-resident: "
            "inputs and outputs already on the GPU (IOBinding). Both: the copy share is shown.",
        )
        cuda = CudaOptions(
            conv_algo_search=st.selectbox(
                "cuDNN convolution search",
                [c.value for c in ConvAlgoSearch],
                index=[c.value for c in ConvAlgoSearch].index(prefill.cuda.conv_algo_search),
                key="cudnn_search",
            ),
            use_tf32=st.toggle("TF32 for FP32 math", prefill.cuda.use_tf32, key="tf32"),
            prefer_nhwc=st.toggle("Prefer NHWC layout", prefill.cuda.prefer_nhwc, key="nhwc"),
            enable_cuda_graph=st.toggle(
                "CUDA graphs (device-resident, fixed shapes)",
                prefill.cuda.enable_cuda_graph,
                key="cuda_graph",
            ),
            float16_io=st.toggle(
                "FP16 with float16 inputs and outputs", prefill.cuda.float16_io, key="fp16_io"
            ),
            fuse_conv_bias=st.toggle(
                "Fuse conv bias into cuDNN's convolution (FP16 needs NHWC)",
                prefill.cuda.fuse_conv_bias,
                key="fuse_conv_bias",
                help="One kernel per convolution instead of a separate bias-add after each; "
                "+48% on ResNet-50 FP16 b1024 on an H200.",
            ),
            conv_max_workspace=st.toggle(
                "cuDNN convolution with the maximum workspace",
                prefill.cuda.conv_max_workspace,
                key="conv_max_workspace",
            ),
        )
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
        fp16 = cols[0].toggle("FP16 kernels (trt_fp16_enable)", old.fp16, key="trt_fp16")
        int8 = cols[1].toggle("INT8 kernels (trt_int8_enable)", old.int8, key="trt_int8")
        calibration_table = st.text_input(
            "INT8 calibration table (a file in the engine cache folder)",
            old.int8_calibration_table,
            key="trt_table",
            help="Not for INT8 static (QDQ): its Q/DQ nodes carry the scales.",
        )
        timing = cols[0].toggle("Timing cache", old.timing_cache, key="trt_timing")
        engine = cols[1].toggle("Engine cache", old.engine_cache, key="trt_engine")
        folders = st.columns(2)
        timing_path = folders[0].text_input(
            "Timing cache folder",
            old.timing_cache_path,
            key="trt_timing_path",
            placeholder=DEFAULT_TIMING_FOLDER,
            help="Inside the data folder; empty: the default.",
        )
        engine_path = folders[1].text_input(
            "Engine cache folder",
            old.engine_cache_path,
            key="trt_engine_path",
            placeholder=DEFAULT_ENGINE_FOLDER,
            help="Inside the data folder; empty: the default.",
        )
        workspace = folders[0].number_input(
            "Workspace limit (MiB, 0: ONNX Runtime's default)",
            0,
            1 << 20,
            old.max_workspace_size >> 20,
            key="trt_workspace",
        )
        level = folders[1].slider(
            "Builder optimization level",
            0,
            5,
            old.builder_optimization_level,
            key="trt_level",
            help="0 builds fastest; 5 searches longest for the fastest engine (3: default).",
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
