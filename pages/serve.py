"""Serve: which batching policy, instance count and variant meet a p99 bound, and at what rate."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from backend.errors import UserError
from backend.reporting import frames, servingcharts
from backend.serving.export import parse_config, perf_analyzer_command
from backend.serving.view import ServeView, serve_view
from pages.components.live import refresh_every
from pages.components.url_state import bound_number, bound_selectbox
from pages.components.widgets import page_header, show_error

page_header(
    "Serve",
    "Dynamic batching predicted for every policy from a sweep's latency curves, under your "
    "p99 bound; every choice is kept in the link.",
)

jobs = frames.comparable_jobs()
if jobs.empty:
    st.info(
        "No measured sweep yet. Run one on the Optimize page with several batch sizes "
        "(for example 1, 4, 16, 32): its latency curve feeds the prediction.",
        icon="🚀",
    )
    st.page_link("pages/optimize.py", label="Optimize a model", icon="🛠️")
    st.stop()

meta = jobs.set_index("job_id")
left, middle, right, last, server = st.columns([3, 1, 1, 1, 1])
with left:
    job_id = bound_selectbox(
        "Sweep",
        meta.index.tolist(),
        "job",
        format_func=lambda jid: (
            f"#{jid} {meta.at[jid, 'model']}"
            + (f" · {meta.at[jid, 'label']}" if meta.at[jid, "label"] else "")
        ),
    )
with middle:
    slo = bound_number("p99 bound (ms)", "slo", 10.0, 0.01, 60_000.0, step=1.0)
with right:
    min_rps = bound_number("Minimum rate (req/s)", "rate", 0.0, 0.0, 1e7, step=10.0)
with last:
    overhead = bound_number(
        "Per-request overhead (ms)",
        "overhead",
        0.3,
        0.0,
        1000.0,
        step=0.1,
        help="Client, network and (de)serialisation time per request outside compute.",
    )
with server:
    execution = bound_number(
        "Server cost per batch (ms)",
        "exec",
        0.1,
        0.0,
        1000.0,
        step=0.05,
        help="Triton's scheduling and backend call per execution, which an in-process sweep "
        "never pays; it caps the rate a tiny model reaches.",
    )
ACTIVE = bool(meta.at[job_id, "state"] in ("queued", "running"))


@st.cache_data(show_spinner="Simulating every batching policy…", max_entries=16)
def _view(
    job_id: int, slo: float, min_rps: float, overhead: float, execution: float, progress: int
) -> ServeView:
    del progress  # in the key only: a new result invalidates the cached view
    return serve_view(job_id, slo, min_rps, overhead, execution)


def _evidence_table(view: ServeView) -> pd.DataFrame:
    rows = []
    for evidence in view.recommendation.ranked[:10]:
        point = evidence.point
        rows.append(
            {
                "configuration": evidence.candidate.label,
                "rate under the bound (req/s)": round(evidence.rate_rps),
                "p50 (ms)": round(point.latency.p50, 2),
                "p99 (ms)": round(point.latency.p99, 2),
                "queue (ms)": round(point.queue_ms, 2),
                "compute (ms)": round(point.compute_ms, 2),
                "mean batch": round(point.mean_batch, 1),
                "source": "measured" if evidence.measured else "predicted",
            }
        )
    return pd.DataFrame(rows)


@st.fragment(run_every=refresh_every(ACTIVE))
def recommendation() -> None:
    progress = int(
        frames.comparable_jobs(include=(job_id,)).set_index("job_id").at[job_id, "results"]
    )
    try:
        view = _view(job_id, slo, min_rps, overhead, execution, progress)
    except UserError as exc:
        show_error(exc)
        return
    rec = view.recommendation
    (st.success if rec.best else st.warning)(rec.sentence, icon="✅" if rec.best else "⚠️")
    st.plotly_chart(servingcharts.throughput_vs_p99(view.curves, slo), key="serve_curves")
    split, histogram = st.columns(2)
    with split:
        st.plotly_chart(servingcharts.queue_compute_split(view.chosen), key="serve_split")
    shown = rec.best or rec.closest
    if shown is not None:
        with histogram:
            st.plotly_chart(
                servingcharts.batch_histogram(shown.point, shown.candidate.label),
                key="serve_batches",
            )
    st.subheader("Evidence")
    st.dataframe(_evidence_table(view), hide_index=True)
    if rec.best is not None:
        st.caption("Reproduce the quoted point against your own Triton server:")
        st.code(perf_analyzer_command(f"model_{job_id}", rec.best.point.spec), language="bash")
    st.caption(
        "Predicted by a simulation of Triton's dynamic batcher fed by the sweep's latency per "
        "batch size; `optiboard serve export` writes the model repository for a configuration."
    )


recommendation()

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
