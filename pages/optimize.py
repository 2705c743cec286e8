"""Optimize: choose precisions, providers, batch sizes and knobs; submit them as one sweep.

Every sweep widget is drawn from its knob's declaration (pages/components/knob_form.py): the
page says where each goes and what this host offers, never a link key, a label or a widget kind.
"""

from __future__ import annotations

import streamlit as st

from backend import pricing
from backend.auth.audit import Action
from backend.auth.roles import Permission
from backend.cluster import targets
from backend.counts import counted
from backend.errors import UserError
from backend.forms import optimize as sweep_form
from backend.generate.library import is_generative
from backend.models import library
from backend.queue import capabilities, jobs
from backend.runtimeenvs import describe
from backend.specs import Precision, SweepSpec
from pages.access import can, cannot, guarded
from pages.components.formatting import EMPTY, plain
from pages.components.gate import require_access
from pages.components.generation import generation_form
from pages.components.knob_form import KnobForm
from pages.components.prices import price_box
from pages.components.sweep_data import as_upload, calibration_data, evaluation_data, measurement
from pages.components.url_state import link_note, not_a_number, url_int
from pages.components.widgets import (
    fill_copy_link,
    job_queued,
    model_picker,
    no_models_yet,
    page_header,
    show_error,
)

require_access(Permission.BROWSE)  # before anything is drawn or read: components/gate.py

page_header(  # drawn before the model is picked: it says what either form does
    "Optimize",
    "Every combination you pick becomes one configuration of a sweep; for a generative model, "
    "one point of a generation benchmark (variant x runtime x prompt x new tokens x sequences).",
)

models = library.list_models()
if not models:
    no_models_yet("optimize it")
    st.stop()

from_job = url_int("from_job")
if (wrong := not_a_number("from_job", "job")) is not None:
    link_note(f"{wrong}; what you submit here is queued as a new job, not a change of one.")
if from_job is not None:
    st.info(f"Changing the sweep of job {from_job}: adjust anything, then submit it as a new job.")
start, link_problem = sweep_form.link_start(st.query_params.to_dict())  # read once
if link_problem is not None:  # the rest of the link still applies
    show_error(link_problem)

model = model_picker(models)
assert model is not None
if is_generative(model):  # a decoder LM: the generation benchmark instead of a sweep
    generation_form(model)
    fill_copy_link()  # now: st.stop() drops every later write, app.py's filling of the link too
    st.stop()


table = capabilities.provider_table()
where = table.where
usable = table.usable()
form = KnobForm(SweepSpec, start)  # form.values: the sweep's knobs as drawn, typed

left, right = st.columns(2)
with left:
    st.subheader("What to build")
    precisions = form.draw("precisions")
    runtimes = form.draw("backends", options=list(usable) or ["onnxruntime"])
    cluster_targets = {t.name: t for t in targets.available()}  # announced by a Ray cluster
    form.draw(
        "targets",
        options=list(cluster_targets),
        labels=lambda n: (
            f"{n} · {cluster_targets[n].nodes} node(s) · {cluster_targets[n].description}"
        ),
        shown=bool(cluster_targets),
    )
    provider_names = form.draw(
        "providers",
        options=sweep_form.offered_providers(
            usable, runtimes, [cluster_targets[n].providers for n in form.values.get("targets", ())]
        ),
        help=f"Providers available {plain(where)}.",
    )
    unavailable = sweep_form.unavailable_rows(table)
    if unavailable:
        with st.expander(f"Unavailable {plain(where)} ({len(unavailable)})"):
            st.dataframe(unavailable, hide_index=True, placeholder=EMPTY)
    gaps = sweep_form.precision_gap_rows(runtimes, provider_names, precisions)
    if gaps:
        with st.expander(f"Precisions a runtime cannot run here ({len(gaps)})"):
            st.caption("These configurations are recorded as unavailable, with the reason.")
            st.dataframe(gaps, hide_index=True, key="precision_gaps", placeholder=EMPTY)
    form.draw("batch_sizes")
    form.draw("simplify")

with right:
    st.subheader("How to run it")
    form.draw("fixed_shapes")
    form.draw("symbolic_dims", options=library.symbolic_dims(model))
    form.draw("optimization_level")
    form.draw("intra_op_threads")
    environments = {e["name"]: e for e in describe()}
    form.draw(  # pinned runtime versions beside the project's (optiboard envs)
        "runtime_env",
        options=list(environments),
        labels=lambda n: f"{n}: {environments[n]['pins']}",
        shown=len(environments) > 1,
    )
    for runtime in ("openvino", "onnxruntime"):  # a runtime's group where it is picked
        form.draw(runtime, shown=runtime in runtimes)
    form.values["measure"] = measurement(start)
    form.draw("min_cosine")
    form.values["prices"] = price_box(  # checked by SweepSpec: a wrong pair is the warning below
        "",
        pricing.prices_text(pricing.default_prices()),  # starts from the link's text
    )
    calibration, int8_static = ("random", None), Precision.INT8_STATIC in precisions
    if int8_static:
        calibration = calibration_data(start, model.id)
    form.draw("calibration_samples", shown=int8_static and calibration[0] != "npz")
    evaluation = evaluation_data(start, model.id)
    form.draw("profile")
    form.draw("fp32_nodes", shown=int8_static)
    form.draw("replicas", shown=bool(cluster_targets))
    more = st.container()  # a knob declared with a widget that the page does not place
    label = st.text_input("Label (optional)", placeholder="e.g. first INT8 try", key="label")

for provider in ("cuda", "tensorrt"):  # a provider's group (its own expander) where it is picked
    form.draw(provider, shown=provider in provider_names)
with more:
    form.rest()
trt_missing = table.why_unavailable("onnxruntime", "tensorrt")
if "tensorrt" not in provider_names and trt_missing and "onnxruntime" in runtimes:
    st.caption(f"TensorRT settings appear once its provider is available; {plain(trt_missing)}.")
try:  # the spec refuses what cannot run, in one sentence
    spec = sweep_form.sweep_from(form.values, start, calibration[0], evaluation[0])
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
            placeholder=EMPTY,
        )
if (why_not := cannot("submit a sweep", Permission.SUBMIT)) is not None:
    button.caption(why_not)  # beside the greyed-out button: what, and who can
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
                spec,
                model.id,
                (calibration[0], as_upload(calibration[1])),
                (evaluation[0], as_upload(evaluation[1])),
                from_job=from_job,
                label=label or None,
            )
    except UserError as exc:
        show_error(exc)
    else:
        job_queued(job.id, counted(job.progress_total, "configuration"))
        if not jobs.list_workers():
            st.warning("No worker is alive; start one with `python -m backend.queue.worker`.")
