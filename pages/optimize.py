"""Optimize: choose precisions, providers, batch sizes and knobs; submit them as one sweep."""

from __future__ import annotations

import streamlit as st

from backend import pricing
from backend.auth.audit import Action
from backend.auth.roles import Permission
from backend.cluster import targets
from backend.errors import UserError
from backend.forms import optimize as sweep_form
from backend.forms.optimize import SweepChoices
from backend.generate.library import is_generative
from backend.knobs import labelled
from backend.models import library
from backend.queue import capabilities, jobs
from backend.runtimeenvs import describe
from backend.specs import (
    MEASURE_PRESETS,
    OPTIMIZATION_LEVELS,
    CudaOptions,
    IoMode,
    Precision,
    SweepSpec,
    TrtOptions,
)
from pages.access import can, guarded
from pages.components.formatting import plain
from pages.components.gate import require_access
from pages.components.generation import generation_form
from pages.components.prices import price_box
from pages.components.runtime_settings import (
    cuda_settings,
    onnxruntime_settings,
    openvino_settings,
    trt_settings,
)
from pages.components.sweep_data import as_upload, calibration_data, evaluation_data
from pages.components.targets import replicas_input, target_picker
from pages.components.url_state import (
    bound_count,
    bound_multiselect,
    bound_number,
    bound_selectbox,
    set_url,
    url_int,
    url_list,
    url_value,
)
from pages.components.widgets import (
    fill_copy_link,
    job_queued,
    model_picker,
    no_models_yet,
    page_header,
    show_error,
)

require_access(Permission.BROWSE)  # before anything is drawn or read: components/gate.py

BATCH_CHOICES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
RUNTIME_LABELS = {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO", "tensorrt": "TensorRT"}

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
if is_generative(model):  # a decoder LM: the generation benchmark instead of a sweep
    generation_form(model)
    fill_copy_link()  # now: st.stop() drops every later write, app.py's filling of the link too
    st.stop()


table = capabilities.provider_table()
where = table.where
usable = table.usable()

left, right = st.columns(2)
with left:
    st.subheader("What to build")
    title, words = labelled(SweepSpec, "precisions")
    precisions = bound_multiselect(
        title,
        [p.value for p in Precision],
        "precisions",
        default=[Precision.FP32.value, Precision.INT8_STATIC.value],
        format_func=lambda v: Precision(v).label,
        help=words,
    )
    title, words = labelled(SweepSpec, "backends")
    runtimes = bound_multiselect(
        title,
        list(usable) or ["onnxruntime"],
        "runtimes",
        default=list(prefill.runtimes),
        format_func=lambda v: RUNTIME_LABELS.get(v, v),
        help=words,
    )
    cluster_targets = {t.name: t for t in targets.available()}  # announced by a Ray cluster
    picked_targets = target_picker(cluster_targets) if cluster_targets else []
    provider_names = bound_multiselect(
        labelled(SweepSpec, "providers")[0],
        sweep_form.offered_providers(
            usable, runtimes, [cluster_targets[name].providers for name in picked_targets]
        ),
        "providers",
        default=["cpu"],
        format_func=str.upper,
        help=f"Providers available {plain(where)}.",
    )
    unavailable = sweep_form.unavailable_rows(table)
    if unavailable:
        with st.expander(f"Unavailable {plain(where)} ({len(unavailable)})"):
            st.dataframe(unavailable, hide_index=True)
    gaps = sweep_form.precision_gap_rows(runtimes, provider_names, precisions)
    if gaps:
        with st.expander(f"Precisions a runtime cannot run here ({len(gaps)})"):
            st.caption("These configurations are recorded as unavailable, with the reason.")
            st.dataframe(gaps, hide_index=True, key="precision_gaps")
    title, words = labelled(SweepSpec, "batch_sizes")
    batches = bound_multiselect(title, BATCH_CHOICES, "batches", default=[1], help=words)
    simplify = st.toggle(
        labelled(SweepSpec, "simplify")[0],
        value=url_value("simplify") == "1",
        key="url_simplify",
    )
    set_url("simplify", "1" if simplify else None)

with right:
    st.subheader("How to run it")
    shapes = bound_selectbox(
        labelled(SweepSpec, "fixed_shapes")[0],
        ["fixed", "dynamic"],
        "shapes",
        format_func=lambda v: {
            "fixed": "Fixed: bake the batch size and dims into the graph",
            "dynamic": "Dynamic: keep symbolic dims in the graph",
        }[v],
    )
    symbolic = library.symbolic_dims(model)
    dims = sweep_form.dim_defaults(symbolic, url_list("dims"))
    if symbolic:
        st.caption("Values for the model's other symbolic dimensions (the first is the batch):")
        dim_cols = st.columns(min(len(symbolic), 4))
        for index, (name, default) in enumerate(list(dims.items())):
            dims[name] = int(
                dim_cols[index % len(dim_cols)].number_input(
                    plain(name), min_value=1, value=default, step=1, key=f"dim_{name}"
                )
            )
        set_url("dims", [f"{k}:{v}" for k, v in dims.items()])
    title, words = labelled(SweepSpec, "optimization_level")
    level = bound_selectbox(title, list(OPTIMIZATION_LEVELS), "opt", default="all", help=words)
    threads = bound_count(labelled(SweepSpec, "intra_op_threads")[0], "threads", 256)
    environments = {e["name"]: e for e in describe()}
    runtime_env = "default"
    if len(environments) > 1:  # pinned runtime versions beside the project's (optiboard envs)
        runtime_env = bound_selectbox(
            "Runtime environment",
            list(environments),
            "env",
            default="default",
            format_func=lambda n: f"{n}: {environments[n]['pins']}",
            help="The measurement children run under this environment's interpreter; every "
            "result records it. One that is not set up is refused when you submit, saying how.",
        )
    openvino = openvino_settings(prefill) if "openvino" in runtimes else prefill.openvino
    ort = onnxruntime_settings(prefill) if "onnxruntime" in runtimes else prefill.onnxruntime
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
    title, words = labelled(SweepSpec, "min_cosine")
    min_cosine = bound_number(
        title,
        "min_cosine",
        prefill.min_cosine,  # the reopened sweep's, else DEFAULT_MIN_COSINE
        0.0,
        1.0,
        step=0.001,
        format="%.4f",
        help=words,
    )
    prices = price_box(  # checked by SweepSpec: a wrong pair is the warning below
        pricing.prices_text(prefill.prices), pricing.prices_text(pricing.default_prices())
    )
    source, calibration_file, samples = "random", None, prefill.calibration_samples
    if Precision.INT8_STATIC.value in precisions:
        source, calibration_file, samples = calibration_data(prefill)
    evaluation_source, evaluation_file = evaluation_data(prefill, model.id)
    title, words = labelled(SweepSpec, "profile")
    profile = st.toggle(title, value=url_value("profile") == "1", key="url_profile", help=words)
    set_url("profile", "1" if profile else None)
    fp32_nodes: tuple[str, ...] = ()
    if Precision.INT8_STATIC.value in precisions:
        kept = st.text_area(
            "Mixed INT8: nodes to keep in FP32, one per line (adds a mixed point)",
            value="\n".join(prefill.fp32_nodes),
            key="fp32_nodes",
            help="Names from the Graph page, the profile or `python -m backend.engine.mixed`.",
        )
        fp32_nodes = sweep_form.node_names(kept)
        set_url("fp32_nodes", "\n".join(fp32_nodes) or None)
    replicas = replicas_input(prefill) if cluster_targets else 1
    label = st.text_input("Label (optional)", placeholder="e.g. first INT8 try", key="label")


io_modes, cuda, find_knee = (
    cuda_settings(prefill)
    if "cuda" in provider_names
    else ((IoMode.END_TO_END,), CudaOptions(), False)
)


trt_missing = table.why_unavailable("onnxruntime", "tensorrt")
if "tensorrt" not in provider_names and trt_missing and "onnxruntime" in runtimes:
    st.caption(f"TensorRT settings appear once its provider is available; {plain(trt_missing)}.")
try:  # TrtOptions and the spec refuse what cannot run, in one sentence
    tensorrt = trt_settings(prefill.tensorrt) if "tensorrt" in provider_names else TrtOptions()
    knobs = {  # SweepSpec's knobs by their declared names
        "precisions": precisions,
        "backends": runtimes,
        "providers": provider_names,
        "batch_sizes": batches,
        "fixed_shapes": shapes != "dynamic",
        "symbolic_dims": dims,
        "optimization_level": level or "all",
        "intra_op_threads": threads,
        "simplify": simplify,
        "openvino": openvino,
        "onnxruntime": ort,
        "calibration_samples": samples,
        "profile": profile,
        "fp32_nodes": fp32_nodes,
        "targets": picked_targets,
        "replicas": replicas,
        "io_modes": io_modes,
        "cuda": cuda,
        "find_knee": find_knee,
        "tensorrt": tensorrt,
        "min_cosine": min_cosine,
        "prices": prices,
        "runtime_env": runtime_env or "default",
    }
    choices = SweepChoices(knobs, preset, source, evaluation_source)
    spec = choices.spec(prefill)
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
            job = sweep_form.submit_choices(
                choices,
                spec,
                model.id,
                as_upload(calibration_file),
                as_upload(evaluation_file),
                from_job=from_job,
                label=label or None,
            )
    except UserError as exc:
        show_error(exc)
    else:
        job_queued(job.id, f"{job.progress_total} configurations")
        if not jobs.list_workers():
            st.warning("No worker is alive; start one with `python -m backend.queue.worker`.")
