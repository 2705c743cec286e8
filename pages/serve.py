"""Serve: serving studies measured on a real Triton server (predictions beside), and the
batching policy predicted from a sweep's latency curves; every choice is kept in the link."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from backend.auth.audit import Action
from backend.auth.roles import Permission
from backend.counts import counted
from backend.errors import UserError
from backend.models import library
from backend.pricing import Prices
from backend.reporting import frames
from backend.runtimeenvs import describe
from backend.serving import charts
from backend.serving.cheapest import CostAnswer
from backend.serving.distribution import Distribution, latency_distribution
from backend.serving.download import repository_zip
from backend.serving.evidence import Evidence
from backend.serving.export import parse_config
from backend.serving.phrasing import firm, uncalibrated_headline
from backend.serving.study import (
    load_label,
    model_variants,
    runtime_labels,
    study_from_form,
    submit_study,
)
from backend.serving.types import Scenario
from backend.serving.view import (
    COST_HEADER,
    RATE_HEADER,
    ServeView,
    StudyView,
    energy_sources,
    evidence_table,
    measured_table,
    serve_view,
    study_of,
    study_view,
)
from pages.access import can, guarded, link_scope
from pages.components.formatting import EMPTY, plain
from pages.components.gate import require_access
from pages.components.live import refresh_every
from pages.components.prices import price_override
from pages.components.url_state import (
    bound_multiselect,
    bound_number,
    bound_selectbox,
    set_url,
    url_int,
)
from pages.components.widgets import (
    job_label,
    model_label,
    nothing_yet,
    page_header,
    show_error,
)

require_access(Permission.BROWSE)  # before anything is drawn or read: components/gate.py

VIEWS = {"measured": "Measured on Triton", "predicted": "Predicted from a sweep"}
ACTIVE_STATES = ("queued", "running")

page_header(
    "Serve",
    "Throughput against p99 for each batching policy and instance count: measured on a real "
    "Triton server by the worker, or predicted from a sweep's latency curves.",
)
STUDIES = link_scope(frames.comparable_jobs(serving=True))  # none yet: predictions first
with st.columns([1, 2])[0]:
    shown = bound_selectbox(
        "Show",
        list(VIEWS),
        "view",
        default="predicted" if STUDIES.empty else "measured",
        format_func=VIEWS.get,
    )


@st.cache_data(show_spinner="Predicting the measured loads…", max_entries=16)
def _study(job_id: int, slo: float, progress: int, prices: Prices) -> StudyView:
    del progress  # in the key only: a new point invalidates the cached view
    return study_view(job_id, slo, prices)


def _cost_sentence(answer: CostAnswer | None) -> None:
    if answer is not None:
        st.info(plain(answer.sentence), icon="💲")


def _measured_charts(view: StudyView) -> None:
    (st.success if view.meets else st.warning)(view.sentence, icon="✅" if view.meets else "⚠️")
    _cost_sentence(view.cost)
    st.plotly_chart(charts.throughput_vs_p99(view.curves, view.slo_p99_ms), key="study_curves")
    st.caption(
        "Solid: measured on Triton. Dashed: predicted by the dynamic-batcher simulation from each "
        "variant's cost measurement on the same server, never fitted to a measured point."
    )
    for line in view.prediction_captions:
        st.caption(line)
    served_on = runtime_labels([p for c in view.configurations for p in c.measured])
    if served_on:  # points stored before it was recorded say nothing
        st.caption("Served on " + ", ".join(served_on) + " in Triton's Python backend.")
    with_points = {c.label: c for c in view.configurations if c.measured}
    label = bound_selectbox("Configuration", list(with_points), "config")
    split, histogram = st.columns(2)
    chosen = {name: view.shown_point(name) for name in with_points}
    if shown := {k: v for k, v in chosen.items() if v}:  # none where the client always saturated
        with split:
            st.plotly_chart(charts.queue_compute_split(shown), key="study_split")
    point = view.shown_point(label) if label else None
    if point is not None:
        with histogram:
            at_load = f"at {load_label(point.spec)}"  # the configuration is named just above
            st.plotly_chart(charts.batch_histogram(point, at_load), key="study_batches")
    st.subheader("Measured points")
    for note in view.notes:  # e.g. a fixed-batch file served without the batching asked for
        st.warning(plain(note), icon="⚠️")
    st.dataframe(
        measured_table(view), hide_index=True, placeholder=EMPTY, column_config=_MEASURED_COLUMNS
    )
    sources = energy_sources(view)
    if sources:  # what measured J/request and idle W, or why they are empty
        st.caption("J/request, idle W: " + "; ".join(plain(s) for s in sources))
    if point is not None:
        st.caption("Reproduce this configuration's shown point with perf_analyzer:")
        st.code(view.reproduce(point), language="bash")
    _distribution_chart(view, label)


@st.cache_data(show_spinner="Reading the points' requests…", max_entries=16)
def _distribution(job_id: int, point_ids: tuple[int, ...], _view: StudyView) -> Distribution:
    del job_id  # in the key with the ids: a stored point and its samples never change
    return latency_distribution(_view, list(point_ids))


def _distribution_chart(view: StudyView, configuration: str | None) -> None:
    """The picked points' latency distributions (the shown configuration's by default)."""
    st.subheader("Latency distribution")
    labels = view.point_labels
    default = next((c.point_ids for c in view.configurations if c.label == configuration), [])
    picked = bound_multiselect(
        "Load points", list(labels), "points", default=default, format_func=labels.get
    )
    shown = _distribution(view.job_id, tuple(picked), view)
    for sentence in shown.sentences:
        st.info(plain(sentence), icon="ℹ️")
    if shown.figure is not None:
        st.plotly_chart(shown.figure, key="study_cdf")


QUEUED_STUDY = "_queued_study"  # (job id, load points) of the study just queued, shown once


def measured() -> None:
    if queued := st.session_state.pop(QUEUED_STUDY, None):  # drawn before the study it names
        st.success(
            f"Queued job {queued[0]}: {counted(queued[1], 'load point')} on Triton.", icon="✅"
        )
    wanted = url_int("study")
    studies = link_scope(frames.comparable_jobs(serving=True, include=(wanted,) if wanted else ()))
    if studies.empty:
        st.info(
            "No serving study yet. Queue one below: the worker serves the model on Triton and "
            "this page fills in as each load point is measured.",
            icon="🚀",
        )
        return
    meta = studies.set_index("job_id")
    left, right = st.columns([3, 1])
    with left:
        study_id = bound_selectbox(
            "Serving study", meta.index.tolist(), "study", format_func=job_label(meta)
        )
    try:
        default_slo = study_of(study_id).slo_p99_ms
    except UserError as exc:
        show_error(exc)
        return
    with right:
        slo = bound_number("p99 bound (ms)", "slo", default_slo, 0.01, 60_000.0, step=1.0)
    active = bool(meta.at[study_id, "state"] in ACTIVE_STATES)
    prices = price_override(
        "the job's stored prices, e.g. cpu=0.40,cuda=3.50",
        "Here it prices every configuration at the rate that meets the bound.",
    )

    @st.fragment(run_every=refresh_every(active))
    def live() -> None:
        require_access(Permission.BROWSE)  # a timed fragment rerun skips the page's first line
        fresh = frames.comparable_jobs(serving=True, include=(study_id,)).set_index("job_id")
        if active and fresh.at[study_id, "state"] not in ACTIVE_STATES:
            st.rerun()  # finished: one full run, which stops the refresh
        view = _study(study_id, slo, int(fresh.at[study_id, "results"]), prices)
        st.caption(
            f"{view.measurements} of {counted(view.planned, 'load point')} measured"
            + (" · filling in live" if active else f" · {fresh.at[study_id, 'state']}")
        )
        if view.measurements:
            _measured_charts(view)
        else:
            st.info(view.sentence)

    live()


def submit_form() -> None:
    """Editors queue a study: model, variants, batching policies, loads and the p99 bound."""
    allowed = can(Permission.SUBMIT)
    with st.expander("Measure a serving study on Triton", expanded=False):
        if not allowed:
            st.caption("Editors and admins can queue a serving study.")
            return
        models = library.list_models()
        if not models:
            st.caption("Upload a model on the Models page first.")
            return
        by_id = {m.id: m for m in models}
        model_id = st.selectbox(
            "Model", list(by_id), format_func=lambda i: model_label(by_id[i]), key="study_model"
        )
        variants = model_variants(model_id)
        picked = st.multiselect(
            "Variants",
            variants,
            default=variants[:1],
            format_func=lambda v: v.name,
            key=f"study_variants_{model_id}",
        )
        cols = st.columns(4)
        scenario = cols[0].selectbox(
            "Scenario",
            list(Scenario),
            index=3,
            format_func=lambda s: s.value,
            key="study_scenario",
        )
        levels = cols[1].text_input("In flight, or req/s for server", "1,4,16", key="study_levels")
        duration = cols[2].number_input("Seconds per point", 0.5, 120.0, 3.0, key="study_s")
        slo = cols[3].number_input("p99 bound (ms)", 0.01, 60_000.0, 10.0, key="study_slo")
        cols = st.columns(3)
        max_batch = cols[0].number_input("Max batch size", 1, 1024, 16, key="study_max_batch")
        delays = cols[1].text_input("Max queue delays (us)", "0,2000", key="study_delays")
        instances = cols[2].text_input("Instance counts", "1", key="study_instances")
        environments = {e["name"]: e["pins"] for e in describe()}
        runtime_env = st.selectbox(
            "Runtime environment",
            list(environments),
            format_func=lambda n: f"{n}: {environments[n]}",
            key="study_env",
            help="Triton's Python backend runs the model on this environment's onnxruntime; "
            "every point records the version that ran. One not set up is refused, saying how.",
        )
        if st.button("Queue the study", key="submit_study", icon="🚀"):
            try:
                study = study_from_form(
                    picked, scenario, levels, duration, int(max_batch), delays, instances, slo
                )
                study = replace(study, runtime_env=runtime_env)
                with guarded(Action.SUBMIT, f"model {model_id}", kind="serving"):
                    job = submit_study(model_id, study)
            except UserError as exc:
                show_error(exc)
            else:  # run again: the view above drew "No serving study yet" before the click
                st.session_state[QUEUED_STUDY] = (job.id, study.point_count)
                set_url("study", job.id)
                st.rerun()


@st.cache_data(show_spinner="Simulating every batching policy…", max_entries=16)
def _view(
    job_id: int,
    slo: float,
    min_rps: float,
    overhead: float,
    execution: float,
    progress: int,
    prices: Prices,
    studies: tuple[int, ...] = (),
) -> ServeView:
    del progress, studies  # in the key only: a new result or finished study invalidates it
    return serve_view(job_id, slo, min_rps, overhead, execution, prices=prices)


# the prediction's inputs, labelled short (each help says the rest)
LABELS = {"rate": "Min rate (req/s)", "overhead": "Overhead (ms)", "exec": "Server cost (ms)"}


def _prediction_controls(meta: pd.DataFrame) -> tuple[int, float, float, float, float]:
    """The sweep and the prediction's settings, each bound to the link."""
    left, middle, right, last, server = st.columns([3, 1, 1, 1, 1])
    with left:
        job_id = bound_selectbox("Sweep", meta.index.tolist(), "job", format_func=job_label(meta))
    with middle:
        slo = bound_number("p99 bound (ms)", "slo", 10.0, 0.01, 60_000.0, step=1.0)
    with right:  # short labels: at 1100 px a long one wrapped to four lines (LABELS)
        min_rps = bound_number(
            LABELS["rate"],
            "rate",
            0.0,
            0.0,
            1e7,
            step=10.0,
            help="Minimum rate: the least a configuration must answer within the bound.",
        )
    with last:
        overhead = bound_number(
            LABELS["overhead"],
            "overhead",
            0.3,
            0.0,
            1000.0,
            step=0.1,
            help="Per-request overhead: client, network and (de)serialisation time per request "
            "outside compute.",
        )
    with server:
        execution = bound_number(
            LABELS["exec"],
            "exec",
            0.1,
            0.0,
            1000.0,
            step=0.05,
            help="Server cost per batch: Triton's scheduling and backend call per execution, "
            "which an in-process sweep never pays; it caps the rate a tiny model reaches.",
        )
    return job_id, slo, min_rps, overhead, execution


def _verdict(view: ServeView) -> None:
    """The uncalibrated headline above the figures (as `serve recommend` prints it), the verdict
    in a box whose colour says how firm it is, and what it rests on as a list."""
    rec = view.recommendation
    if headline := uncalibrated_headline(rec):
        st.warning(headline, icon="⚠️")
    if rec.best is None:
        st.warning(rec.verdict, icon="⚠️")
    elif firm(rec.best):  # measured, or calibrated by a study's costs, on stable inputs
        st.success(rec.verdict, icon="✅")
    else:  # a prediction from the sweep alone, or resting on an unstable measurement
        st.info(rec.verdict, icon="🔮")
    if rec.details:
        st.markdown("\n".join(f"- {detail}" for detail in rec.details))
    _cost_sentence(view.cost)


_EVIDENCE_COLUMNS = {  # the cost to the registry's digits ($0.049, not a cut "0.04")
    COST_HEADER: st.column_config.NumberColumn(
        COST_HEADER,
        format=frames.METRICS["cost_per_million"].printf(),
        help="Dollars per million inferences at the rate under the bound, at the hardware's "
        "price per hour; empty where no rate meets the bound or no price applies.",
    ),
    # 30,180 as the sentences above write it, not 30180 (grouped by the browser's locale)
    RATE_HEADER: st.column_config.NumberColumn(RATE_HEADER, format="localized"),
}
# the measured points' rates, grouped as the sentences group them
_MEASURED_COLUMNS = {
    name: st.column_config.NumberColumn(name, format="localized")
    for name in ("req/s", "predicted req/s")
}


def _recommendation(view: ServeView, job_id: int, slo: float) -> None:
    rec = view.recommendation
    _verdict(view)
    st.plotly_chart(charts.throughput_vs_p99(view.curves, slo), key="serve_curves")
    if view.chart_caption:
        st.caption(view.chart_caption)
    split, histogram = st.columns(2)
    with split:
        st.plotly_chart(charts.queue_compute_split(view.chosen), key="serve_split")
    shown = rec.best or rec.closest
    if shown is not None:
        with histogram:
            st.plotly_chart(
                charts.batch_histogram(shown.point, shown.candidate.label),
                key="serve_batches",
            )
    st.subheader("Evidence")
    st.dataframe(
        evidence_table(view), hide_index=True, placeholder=EMPTY, column_config=_EVIDENCE_COLUMNS
    )
    if rec.best is not None:
        point = rec.best.point
        offered = point.spec.target_rps
        apart = bool(offered) and abs(point.achieved_rps / offered - 1) > 0.02
        st.caption(
            "Reproduce the quoted point against your own Triton server"
            + (
                f" (it offers {offered:,.0f} req/s, the rate the prediction was fed; "
                f"{point.achieved_rps:,.0f} req/s is what it predicts the server answers):"
                if apart
                else ":"
            )
        )
        st.code(view.reproduce(point), language="bash")
        _repository_download(job_id, rec.best, view.model_name)
    studied = [v for v in view.variants if v.costs_from]
    fed = (
        "the server costs a serving study measured"
        if studied
        else "the sweep's latency per batch size"
    )
    st.caption(
        f"Predicted by a simulation of Triton's dynamic batcher fed by {fed}; "
        "`optiboard serve export` writes the model repository for any other configuration."
    )
    if len(studied) < len(view.variants):  # the one action that measures what is left out
        st.page_link(
            "pages/serve.py",
            label="Measure this model's server costs: queue a serving study on Triton",
            icon="🚀",
            query_params={"view": "measured"},
        )
        st.caption("Or measure them and confirm the best configurations from a terminal:")
        st.code(f"optiboard serve recommend {job_id} --slo {slo:g} --confirm 3", language="bash")


def _repository_download(job_id: int, best: Evidence, model_name: str) -> None:
    """The recommended configuration's Triton model repository, built only when clicked."""
    if best.candidate.variant.provider != "cpu":
        st.caption(f"Export {plain(best.candidate.label)} from a terminal: `serve export --gpu`.")
        return
    st.download_button(
        f"Triton model repository of {best.candidate.label} (zip)",
        lambda: repository_zip(job_id, best, model_name)[1],
        f"{model_name}-triton.zip",
        "application/zip",
        icon="⬇️",
        key="download_repository",
        on_click="ignore",  # as Compare's downloads: a rerun would drop the deferred file
    )


def _config_check() -> None:
    with st.expander("Check a config.pbtxt"):
        pasted = st.text_area("Paste a config.pbtxt", key="pasted_config", height=160)
        if st.button("Check with Triton's model_config", key="check_config") and pasted.strip():
            try:
                parsed = parse_config(pasted)
            except UserError as exc:
                show_error(exc)
            else:
                st.success(
                    f"Parses as Triton's ModelConfig: max_batch_size {parsed.max_batch_size}, "
                    f"{len(parsed.instance_group)} instance group(s).",
                    icon="✅",
                )


def predicted() -> None:
    jobs = frames.comparable_jobs()
    if jobs.empty:
        nothing_yet(
            "No measured sweep yet. Run one on the Optimize page with several batch sizes "
            "(for example 1, 4, 16, 32): its latency curve feeds the prediction.",
            icon="🚀",
        )
    meta = jobs.set_index("job_id")
    job_id, slo, min_rps, overhead, execution = _prediction_controls(meta)
    prices = price_override(
        "the job's stored prices, e.g. cpu=0.40,cuda=3.50",
        "Here it prices every configuration at the rate that meets the bound.",
    )
    active = bool(meta.at[job_id, "state"] in ACTIVE_STATES)

    @st.fragment(run_every=refresh_every(active))
    def recommendation() -> None:
        require_access(Permission.BROWSE)  # a timed fragment rerun skips the page's first line
        progress = int(
            frames.comparable_jobs(include=(job_id,)).set_index("job_id").at[job_id, "results"]
        )
        studies = frames.comparable_jobs(serving=True)
        finished = studies[studies["state"] == "succeeded"] if not studies.empty else studies
        done = tuple(int(i) for i in finished.get("job_id", []))  # new server costs to reuse
        try:
            view = _view(job_id, slo, min_rps, overhead, execution, progress, prices, done)
        except UserError as exc:
            show_error(exc)
            return
        _recommendation(view, job_id, slo)

    recommendation()
    _config_check()


if shown == "measured":
    measured()
    submit_form()
else:
    predicted()
