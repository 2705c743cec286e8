"""Optimize: choose precisions, providers, batch sizes and knobs; submit them as one sweep."""

from __future__ import annotations

import streamlit as st

from backend.auth.audit import Action
from backend.auth.roles import Permission
from backend.cluster import targets
from backend.errors import UserError
from backend.models import library
from backend.queue import calibration, capabilities, jobs
from backend.runtimes import precision_gaps
from backend.specs import (
    MEASURE_PRESETS,
    OPTIMIZATION_LEVELS,
    ConvAlgoSearch,
    CudaOptions,
    IoMode,
    PerformanceHint,
    Precision,
    SweepSpec,
    TrtOptions,
)
from backend.trtoptions import DEFAULT_ENGINE_FOLDER, DEFAULT_TIMING_FOLDER
from pages.access import can, guarded
from pages.components.formatting import plain
from pages.components.url_state import (
    bound_multiselect,
    bound_selectbox,
    set_url,
    url_int,
    url_list,
    url_value,
)
from pages.components.widgets import model_picker, no_models_yet, page_header, show_error

BATCH_CHOICES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
RUNTIME_LABELS = {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO", "tensorrt": "TensorRT"}
DEFAULT_DIM = 16

page_header("Optimize", "Every combination you pick becomes one configuration of a sweep.")

models = library.list_models()
if not models:
    no_models_yet("optimize it")
    st.stop()

from_job = url_int("from_job")
if from_job is not None:
    st.info(f"Changing the sweep of job {from_job}: adjust anything, then submit it as a new job.")
try:  # what the link says beyond the bound widgets: calibration file, samples, custom measurement
    prefill = jobs.spec_from_query(st.query_params.to_dict())
except UserError as exc:
    show_error(exc)
    prefill = SweepSpec()

model = model_picker(models)
assert model is not None


table = capabilities.provider_table()
where = table.where
usable = table.usable()

left, right = st.columns(2)
with left:
    st.subheader("What to build")
    precisions = bound_multiselect(
        "Precisions",
        [p.value for p in Precision],
        "precisions",
        default=[Precision.FP32.value, Precision.INT8_STATIC.value],
        format_func=lambda v: Precision(v).label,
        help="FP32 is the reference every other precision's accuracy is compared with.",
    )
    runtimes = bound_multiselect(
        "Runtimes",
        list(usable) or ["onnxruntime"],
        "runtimes",
        default=list(prefill.runtimes),
        format_func=lambda v: RUNTIME_LABELS.get(v, v),
        help="Each precision is measured on each runtime, side by side; every accuracy is "
        "against the same FP32 reference.",
    )
    cluster_targets = {t.name: t for t in targets.available()}
    picked_targets = []
    if cluster_targets:  # a Ray cluster is configured and its nodes have announced themselves
        picked_targets = bound_multiselect(
            "Hardware targets",
            list(cluster_targets),
            "targets",
            format_func=lambda n: (
                f"{n} · {cluster_targets[n].nodes} node(s) · {cluster_targets[n].description}"
            ),
            help="Every configuration runs on each target picked; Compare shows them side by "
            "side. None picked: any node of the cluster.",
        )
    for name in picked_targets:  # providers the target's nodes have, even where this one lacks
        for runtime, names in cluster_targets[name].providers.items():
            usable.setdefault(runtime, [])
            usable[runtime] = list(dict.fromkeys([*usable[runtime], *names]))
    provider_names = bound_multiselect(
        "Execution providers",
        list(dict.fromkeys(p for r in runtimes for p in usable.get(r, []))),
        "providers",
        default=["cpu"],
        format_func=str.upper,
        help=f"Providers available {plain(where)}.",
    )
    unavailable = [
        {"runtime": u.runtime, "provider": u.provider.upper(), "why not": u.reason}
        for u in table.unavailable()
    ]
    if unavailable:
        with st.expander(f"Unavailable {plain(where)} ({len(unavailable)})"):
            st.dataframe(unavailable, hide_index=True)
    gaps = [  # this machine's answer; a worker elsewhere records its own reason in the result
        {"runtime": g.runtime, "provider": g.provider.upper(), "precision": g.precision.label}
        | {"why not": g.reason}
        for g in precision_gaps(runtimes, provider_names, [Precision(p) for p in precisions])
    ]
    if gaps:
        with st.expander(f"Precisions a runtime cannot run here ({len(gaps)})"):
            st.caption("These configurations are recorded as unavailable, with the reason.")
            st.dataframe(gaps, hide_index=True, key="precision_gaps")
    batches = bound_multiselect(
        "Batch sizes",
        BATCH_CHOICES,
        "batches",
        default=[1],
        help="Latency is per call; a call processes one batch.",
    )
    simplify = st.toggle(
        "Simplify the graph first (onnxslim)",
        value=url_value("simplify") == "1",
        key="url_simplify",
    )
    set_url("simplify", "1" if simplify else None)

with right:
    st.subheader("How to run it")
    shapes = bound_selectbox(
        "Shapes",
        ["fixed", "dynamic"],
        "shapes",
        format_func=lambda v: {
            "fixed": "Fixed: bake the batch size and dims into the graph",
            "dynamic": "Dynamic: keep symbolic dims in the graph",
        }[v],
    )
    symbolic = library.symbolic_dims(model)
    url_dims = dict(
        part.split(":", 1) for part in url_list("dims") if ":" in part and part.split(":")[1]
    )
    dims: dict[str, int] = {}
    if symbolic:
        st.caption("Values for the model's other symbolic dimensions (the first is the batch):")
        dim_cols = st.columns(min(len(symbolic), 4))
        for index, name in enumerate(symbolic):
            wanted = url_dims.get(name, "")
            default = int(wanted) if wanted.isdigit() else DEFAULT_DIM
            dims[name] = int(
                dim_cols[index % len(dim_cols)].number_input(
                    plain(name), min_value=1, value=default, step=1, key=f"dim_{name}"
                )
            )
        set_url("dims", [f"{k}:{v}" for k, v in dims.items()])
    level = bound_selectbox(
        "Graph optimization level",
        list(OPTIMIZATION_LEVELS),
        "opt",
        default="all",
        help="ONNX Runtime's graph optimizations; 'all' includes layout changes.",
    )
    threads = int(
        st.number_input(
            "Intra-op threads (0 = let the runtime choose)",
            min_value=0,
            max_value=256,
            value=url_int("threads") or 0,
            key="url_threads",
        )
    )
    set_url("threads", threads or None)
    hint, streams = prefill.performance_hint, prefill.streams
    if "openvino" in runtimes:
        hint = bound_selectbox(
            "OpenVINO performance hint",
            [h.value for h in PerformanceHint],
            "hint",
            default=prefill.performance_hint.value,
            help="Latency: one request as fast as possible; throughput: most requests per second.",
        )
        streams = int(
            st.number_input(
                "OpenVINO streams (0 = as the hint chooses)",
                min_value=0,
                max_value=64,
                value=url_int("streams") or 0,
                key="url_streams",
            )
        )
        set_url("streams", streams or None)
    custom = [jobs.CUSTOM_MEASURE] if url_value("measure") == jobs.CUSTOM_MEASURE else []
    preset = bound_selectbox(
        "Measurement",
        list(MEASURE_PRESETS) + custom,
        "measure",
        default="standard",
        format_func=lambda v: {
            "quick": "Quick: a few seconds per configuration, for a first look",
            "standard": "Standard: 3 stable windows within 10%",
            "thorough": "Thorough: 5 stable windows within 5%",
            jobs.CUSTOM_MEASURE: "As the sweep you reopened measured (custom settings)",
        }[v],
    )
    calibration_file = None
    source = "random"
    samples = prefill.calibration_samples
    if Precision.INT8_STATIC.value in precisions:
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
        if source == "npz":
            calibration_file = st.file_uploader(
                "Calibration .npz: one array per input name, samples along the first axis",
                type=["npz"],
                key="calibration_file",
            )
        else:
            samples = int(
                st.number_input(
                    "Random calibration samples", min_value=1, max_value=1024, value=samples
                )
            )
            set_url("cal_samples", samples)
    evaluation_kept = ["stored"] if prefill.evaluation_sha256 else []
    evaluation_source = st.radio(
        "Evaluation set (task accuracy)",
        evaluation_kept + ["none", "npz"],
        format_func=lambda v: {
            "stored": "The evaluation .npz of the sweep you reopened: "
            + str(jobs.npz_filename(model.id, prefill.evaluation_sha256, "evaluation")),
            "none": "None: agreement with FP32 on random inputs only",
            "npz": "Upload an evaluation .npz",
        }[v],
        horizontal=True,
        key="evaluation_source",
        help="Kept apart from the calibration data: the same file is refused as both.",
    )
    evaluation_file = None
    if evaluation_source == "npz":
        evaluation_file = st.file_uploader(
            "Evaluation .npz: one array per input name, samples along the first axis, and "
            "optionally `labels` (one integer class per sample) for top-1 accuracy",
            type=["npz"],
            key="evaluation_file",
        )
    profile = st.toggle(
        "Profile every configuration per node",
        value=url_value("profile") == "1",
        key="url_profile",
        help="ONNX Runtime's own profiler, in a separate pass after the clean timing: the why "
        "lines then cite it and the Jobs page shows per-node bars.",
    )
    set_url("profile", "1" if profile else None)
    fp32_nodes: tuple[str, ...] = ()
    if Precision.INT8_STATIC.value in precisions:
        kept = st.text_area(
            "Mixed INT8: nodes to keep in FP32, one per line (adds a mixed point)",
            value="\n".join(prefill.fp32_nodes),
            key="fp32_nodes",
            help="Names from the Graph page, the profile or `python -m backend.engine.mixed`.",
        )
        fp32_nodes = tuple(line.strip() for line in kept.splitlines() if line.strip())
        set_url("fp32_nodes", "\n".join(fp32_nodes) or None)
    replicas = 1
    if cluster_targets:
        replicas = int(
            st.number_input(
                "Replicas (data-parallel copies on one node's devices)",
                min_value=1,
                max_value=64,
                value=prefill.replicas,
                key="replicas",
                help="N copies run at once on N GPUs (or share the CPU) of one node; the result "
                "gives aggregate and per-device throughput.",
            )
        )
        set_url("replicas", replicas if replicas > 1 else None)
    label = st.text_input("Label (optional)", placeholder="e.g. first INT8 try", key="label")


def _cuda_fields() -> tuple[tuple[IoMode, ...], CudaOptions, bool]:
    """The CUDA provider's own knobs, offered only when it is picked; the spec refuses the
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


io_modes, cuda, find_knee = (
    _cuda_fields() if "cuda" in provider_names else ((IoMode.END_TO_END,), CudaOptions(), False)
)


def _trt_fields() -> TrtOptions:
    """The tensorrt provider's options, offered only when it is picked (so only where it is
    available); TrtOptions and the spec refuse what it cannot run, with the reason."""
    old = prefill.tensorrt
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


tensorrt = TrtOptions()
trt_missing = next(
    (
        u.reason
        for u in table.unavailable()
        if (u.runtime, u.provider) == ("onnxruntime", "tensorrt")
    ),
    "",
)
trt_error: UserError | None = None  # shown with the sweep's own refusals below
try:
    if "tensorrt" in provider_names:
        tensorrt = _trt_fields()
    elif trt_missing and "onnxruntime" in runtimes:
        st.caption(
            f"TensorRT settings appear once its provider is available; {plain(trt_missing)}."
        )
except UserError as exc:
    trt_error = exc

try:
    if not runtimes:
        raise UserError("Pick at least one runtime.")
    if trt_error is not None:
        raise trt_error
    spec = SweepSpec(
        precisions=tuple(precisions),
        providers=tuple(provider_names),
        batch_sizes=tuple(batches),
        backends=tuple(runtimes),
        performance_hint=hint or PerformanceHint.LATENCY,
        streams=streams,
        fixed_shapes=shapes != "dynamic",
        symbolic_dims=tuple(dims.items()),
        optimization_level=level or "all",
        intra_op_threads=threads,
        simplify=simplify,
        calibration_sha256=prefill.calibration_sha256 if source == "stored" else None,
        calibration_samples=samples,
        evaluation_sha256=prefill.evaluation_sha256 if evaluation_source == "stored" else None,
        measure=MEASURE_PRESETS.get(preset or "standard", prefill.measure),
        profile=profile,
        fp32_nodes=fp32_nodes,
        targets=tuple(picked_targets),
        replicas=replicas,
        io_modes=io_modes,
        cuda=cuda,
        find_knee=find_knee,
        tensorrt=tensorrt,
    )
except UserError as exc:
    spec = None
    st.warning(str(exc), icon="✋")

st.divider()
count = len(spec.configurations()) if spec else 0
summary, button = st.columns([3, 1], vertical_alignment="center")
summary.metric("Configurations in this sweep", count)
if spec is not None:
    with summary.expander("Show them"):
        st.dataframe(
            [{"configuration": c.label, "key": c.key} for c in spec.configurations()],
            hide_index=True,
        )
if button.button(
    f"Submit sweep ({count})",
    type="primary",
    disabled=spec is None or not can(Permission.SUBMIT),
    key="submit_sweep",
):
    assert spec is not None
    try:
        with guarded(Action.SUBMIT, f"model {model.id}", configurations=count):
            spec = calibration.with_calibration(
                spec,
                model.id,
                calibration_file.getvalue() if calibration_file is not None else None,
                calibration_file.name if calibration_file is not None else None,
                wanted=source == "npz",
            )
            spec = calibration.with_evaluation(
                spec,
                model.id,
                evaluation_file.getvalue() if evaluation_file is not None else None,
                evaluation_file.name if evaluation_file is not None else None,
                wanted=evaluation_source == "npz",
            )
            if from_job is not None:
                job = jobs.resubmit_with_changes(from_job, spec, label=label or None)
            else:
                job = jobs.submit_sweep(model.id, spec, label=label or None)
    except UserError as exc:
        show_error(exc)
    else:
        st.success(f"Queued job {job.id} with {job.progress_total} configurations.", icon="✅")
        links = st.columns(2)
        links[0].page_link(
            "pages/jobs.py", label=f"Follow job {job.id}", icon="⏱️", query_params={"job": job.id}
        )
        links[1].page_link(
            "pages/compare.py",
            label="Compare its results as they arrive",
            icon="📊",
            query_params={"jobs": job.id},
        )
        if not jobs.list_workers():
            st.warning("No worker is alive; start one with `python -m backend.queue.worker`.")
