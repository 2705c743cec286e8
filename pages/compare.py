"""Compare: results across jobs and models as charts, speedups against a baseline, and exports."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pandas as pd
import streamlit as st

from backend.auth.roles import Permission
from backend.counts import counted
from backend.forms import compare as compare_link
from backend.pricing import unpriced_sentence
from backend.reporting import cost, exports, frames, htmlreport, price_mix
from backend.reporting.htmlreport import CHARTS
from backend.reporting.side_by_side import runtimes_side_by_side, targets_side_by_side
from backend.results import GAP, ResultStatus
from pages.access import current, link_scope, signed_link_control
from pages.components.formatting import EMPTY, plain
from pages.components.gate import require_access
from pages.components.generation import generation_comparison
from pages.components.live import refresh_every, work_in_progress
from pages.components.prices import price_override
from pages.components.regression import regression_comparison
from pages.components.url_state import (
    bound_multiselect,
    bound_pills,
    bound_selectbox,
    link_note,
    set_url,
    url_ids,
    url_list,
    url_value,
)
from pages.components.widgets import (
    fill_copy_link,
    job_label,
    nothing_yet,
    page_header,
)

require_access(Permission.COMPARE)  # before anything is drawn or read: components/gate.py


def _number(
    key: str, spec: str | None = None, label: str | None = None, help: str | None = None
) -> Any:  # Streamlit's ColumnConfig, which it does not export
    """A table column of a registered figure: its header and format (spec overrides the format)."""
    metric = frames.METRICS[key]
    return st.column_config.NumberColumn(
        label or metric.header, format=metric.printf(spec), help=help
    )


page_header("Compare", "Pick results across jobs and models; every choice is kept in the link.")

if url_value("view") == "generation":  # generation jobs: token latency, memory, perplexity
    generation_comparison()
    fill_copy_link()  # now: st.stop() drops every later write, app.py's filling of the link too
    st.stop()
if url_value("view") == "regression":  # two runtime environments: verdicts, intervals, op diffs
    regression_comparison()
    fill_copy_link()
    st.stop()
if not link_scope(frames.comparable_jobs(regression=True)).empty:
    st.page_link(
        "pages/compare.py",
        label="Regression checks: one model on two runtime versions, with verdicts",
        icon="🔁",
        query_params={"view": "regression"},
    )
if not link_scope(frames.comparable_jobs(generation=True)).empty:
    st.page_link(
        "pages/compare.py",
        label="Generation benchmarks: TTFT, ITL, tokens/s and perplexity",
        icon="💬",
        query_params={"view": "generation"},
    )

wanted_jobs = url_ids("jobs")
available = link_scope(frames.comparable_jobs(include=wanted_jobs))


@st.fragment(run_every=refresh_every(True))
def wait_for_first_result() -> None:
    """While the picked jobs have nothing yet, look again until their first result lands."""
    require_access(Permission.COMPARE)  # a timed fragment rerun skips the page's first line
    fresh = frames.comparable_jobs(include=wanted_jobs)
    if fresh["results"].sum() > 0 or not work_in_progress():
        st.rerun()
    st.caption("Waiting for the first result…")


def say_dropped(asked: list[str], offered: Collection[int]) -> None:
    """One sentence per job the link names that is not compared here, with its own view."""
    for dropped in compare_link.dropped_jobs(asked, offered, current().jobs):
        link_note(dropped.sentence)
        if dropped.page is not None:
            st.page_link(
                f"pages/{dropped.page}.py",
                label=f"Open job {dropped.job_id} there",
                icon="➡️",
                query_params=dropped.query,
            )


if available.empty:
    say_dropped(url_list("jobs"), ())
    nothing_yet(
        "No results to compare yet. Submit a sweep on the Optimize page; its results appear here "
        "as soon as the worker measures them.",
        icon="📊",
    )

job_meta = available.set_index("job_id")
arrived = "url_jobs" not in st.session_state  # the link's jobs= not yet read by the picker
asked = url_list("jobs")  # as the link wrote it, before the picker writes its choice back
job_ids = bound_multiselect(
    "Jobs",
    job_meta.index.tolist(),
    "jobs",
    default=job_meta.index.tolist()[:1],
    format_func=job_label(job_meta),
    note=False,  # each dropped job is said below, with the view that shows it
)
if arrived:  # once: the picker writes its own choice to the link after this
    say_dropped(asked, job_meta.index)
if not job_ids:
    st.info("Pick at least one job above.")
    st.stop()
signed_link_control(job_ids)
ACTIVE = bool(job_meta.loc[job_ids, "state"].isin(["queued", "running"]).any())
if int(job_meta.loc[job_ids, "results"].sum()) == 0:
    st.info("These jobs have no results yet; this page fills in as the worker measures them.")
    if ACTIVE:
        wait_for_first_result()
    st.stop()


@st.cache_data(show_spinner=False, max_entries=32)
def _frame(job_ids: tuple[int, ...], progress: tuple[int, ...]) -> pd.DataFrame:
    """Cached per selection and per progress, so a new result invalidates it."""
    del progress
    return frames.results_frame(job_ids=list(job_ids))


@st.cache_data(show_spinner=False, max_entries=8)
def _samples(result_ids: tuple[int, ...]) -> dict:
    return frames.samples_for(list(result_ids))


COST_HELP = "Price per hour / (samples/s x 3600) x 1e6; only results with the right outputs."


def _priced(view: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The view priced by the link's price table when given (else each job's stored one), and
    the cost axis picked among the registered cost and energy figures that have values."""
    prices = price_override(
        "each job's stored prices, e.g. cpu=0.40,cuda=3.50",
        "Here it prices every configuration again without measuring again.",
    )
    if prices:
        view = cost.reprice(view, prices)
    axes = htmlreport.priced_axes(view)
    if not axes:
        return view, None
    names = {m.key: m.axis_title for m in axes}
    picked = bound_selectbox("Cost axis", list(names), "cost", format_func=names.get)
    return view, picked


@st.fragment(run_every=refresh_every(ACTIVE))
def comparison() -> None:
    require_access(Permission.COMPARE)  # a timed fragment rerun skips the page's first line
    meta = frames.comparable_jobs(include=tuple(job_ids))
    if ACTIVE and not meta[meta["job_id"].isin(job_ids)]["state"].isin(["queued", "running"]).any():
        st.rerun()
    progress = tuple(
        int(meta.loc[meta["job_id"] == jid, "results"].sum()) for jid in sorted(job_ids)
    )
    frame = _frame(tuple(sorted(job_ids)), progress)
    if frame.empty:
        st.info("These jobs have no results yet; this page fills in as they arrive.")
        return
    ok = frame[frame["status"] == ResultStatus.OK.value]
    labels = dict(zip(frame["result_id"], frame["label"], strict=True))

    # the toggle on a line of its own: in a column of 3/7 its label was cut at 1100 px ("All
    # measured configurations (new r..."), and so was the baseline's "Each job's own first F..."
    everything = st.toggle(
        "All measured configurations (new results join as they arrive)",
        value=url_value("all") != "0",
        key="url_all",
    )
    set_url("all", None if everything else "0")
    if everything:
        selected = ok["result_id"].tolist()
    else:
        selected = bound_multiselect(
            "Configurations",
            frame["result_id"].tolist(),
            "configs",
            default=ok["result_id"].tolist(),
            format_func=lambda rid: labels.get(rid, str(rid)),
        )
    controls = st.columns(2)
    view = frame[frame["result_id"].isin(selected)]
    series = list(dict.fromkeys(view["series"]))
    with controls[0]:  # by default each job against its own FP32, as `optiboard compare`
        baseline = bound_selectbox(
            "Baseline",
            [htmlreport.EACH_MODEL, *series],
            "baseline",
            default=htmlreport.EACH_MODEL,
            format_func=lambda s: htmlreport.EACH_MODEL_TEXT if s == htmlreport.EACH_MODEL else s,
        )
    with controls[1]:
        loss_metric = bound_selectbox(
            "Accuracy loss",
            list(frames.LOSS_METRICS),
            "loss",
            format_func=frames.LOSS_METRICS.get,
        )
    chosen = bound_pills(
        "Charts", list(CHARTS), "charts", default=list(CHARTS), format_func=CHARTS.get
    )
    view, cost_key = _priced(view)

    if view.empty:
        st.info("No configuration selected.")
        return
    # speedups, accuracy loss, the fronts of stable measurements (an unstable one beyond is named)
    view = htmlreport.prepared(view, baseline, loss_metric or htmlreport.DEFAULT_LOSS, cost_key)
    loss_label = frames.LOSS_METRICS[loss_metric or "mean_rel_error"]
    measured = view[view["status"] == ResultStatus.OK.value]
    samples = _samples(tuple(measured["result_id"])) if "distribution" in chosen else {}

    st.caption(
        f"{counted(len(measured), 'measured configuration')} in {len(series)} series"
        + (" · refreshing while the sweep runs" if ACTIVE else "")
    )
    for sentence in cost.cheapest_sentences(view):  # one per model: never one model over another
        st.info(plain(sentence), icon="💲")
    if said := unpriced_sentence(cost.unpriced_targets(view), "the price per hour above"):
        st.warning(plain(said), icon="💲")  # else the cost chart is left out without a word
    if (mixed := price_mix.mixed_prices(view)) is not None:  # the same hardware, two prices
        st.warning(plain(mixed), icon="💲")
    figures = htmlreport.figures(view, chosen, samples, loss_label, cost_key)
    captions = htmlreport.chart_captions(view, cost_key)  # as the HTML report says them
    for index in range(0, len(figures), 2):
        cols = st.columns(2)
        for col, (key, figure) in zip(cols, figures[index : index + 2], strict=False):
            col.plotly_chart(figure, key=f"chart_{key}")
            if key in captions:  # what its fronts span, a point one leaves out with its numbers
                col.caption(plain(captions[key]))

    against = htmlreport.baseline_text(view, baseline)
    each = baseline == htmlreport.EACH_MODEL and against
    st.subheader("Speedups" + (f" against {plain(against)}" if against else ""))
    if each:
        st.caption(htmlreport.EACH_JOB_CAPTION)  # the HTML report says it too
    columns, absent = htmlreport.table_columns(view)
    st.dataframe(
        view[[*columns, "notes"]],
        hide_index=True,
        column_config={
            "label": st.column_config.TextColumn("label", width="large"),  # names are long
            "batch_size": st.column_config.NumberColumn("batch", format="%d"),
            **{key: _number(key) for key in ("p50_ms", "p90_ms", "p99_ms")},
            # 1,136,658 as the cheapest sentence writes it, not 1136657.5 (the browser's locale)
            "throughput": st.column_config.NumberColumn(
                frames.METRICS["throughput"].header, format="localized"
            ),
            "cost_per_million": _number("cost_per_million", help=COST_HELP),
            "price_per_hour": _number("price_per_hour"),
            "speedup": _number("speedup"),
            "throughput_ratio": _number("throughput_ratio"),
            "accuracy_loss": _number("accuracy_loss", label=loss_label),
            "pareto": st.column_config.CheckboxColumn("Pareto"),
            "stable": st.column_config.CheckboxColumn(
                "Stable", help="The measurement's windows agreed; an unstable one claims nothing"
            ),
            "speedup_firm": st.column_config.CheckboxColumn(
                "Speedup firm",
                help="The speedup (above or below 1) is a firm figure: this row and the baseline "
                "row it divides by both measured stable, and its median-call speedup and its "
                f"throughput ratio agree within {GAP:g}x",
            ),
            "eval_top1_accuracy": _number(
                "eval_top1_accuracy", help="Against the evaluation set's labels"
            ),
            "eval_top1_agreement": _number("eval_top1_agreement", help="With FP32, same inputs"),
            "evaluation_set": st.column_config.TextColumn("evaluation set"),
            "calibration_set": st.column_config.TextColumn("calibration set"),
            "peak_rss_mb": _number("peak_rss_mb", help=frames.METRICS["peak_rss_mb"].label),
            **{
                key: _number(key, help=frames.METRICS[key].label)
                for key in ("j_per_sample", "j_per_sample_above_idle", "idle_w")
            },
            **{  # the spread of the kept windows' J/sample
                f"j_per_sample_{end}": _number("j_per_sample", label=f"J/sample {end}")
                for end in ("min", "max")
            },
        },
        key="speedup_table",
        placeholder=EMPTY,
    )
    if absent:  # said once, rather than columns of empty cells pushing speedup off-screen
        st.caption("Not shown, empty in every row: " + ", ".join(absent) + ".")
    sources = sorted(set(view["energy_source"].dropna()))
    if sources:  # what measured the energy columns, or why they are empty
        st.caption("Energy (J/sample, idle W): " + "; ".join(plain(s) for s in sources))
    if ran := exports.what_ran_in(view):  # the runtime, its version and the hardware behind
        st.caption("What ran: " + "; ".join(plain(line) for line in ran))
    gpu = view[view["tflops"].notna()]
    if not gpu.empty:
        st.subheader("Distance to the hardware")
        st.caption(
            "FLOP/s = the model's static FLOPs per sample x samples/s; the peak is the device's "
            "dense Tensor Core figure for the precision that ran (FP32 on CUDA runs TF32). Copy "
            "share = (end-to-end p50 - device-resident p50) / end-to-end p50."
        )
        columns = ["label", "timing", "throughput", "copy_share", "tflops", "peak_fraction"]
        st.dataframe(
            gpu[[*columns, "gpu_memory_mb", "mlperf_share"]],
            hide_index=True,
            column_config={
                "throughput": _number("throughput", ".0f"),
                "copy_share": _number("copy_share"),
                "tflops": _number("tflops", ".1f"),
                "peak_fraction": _number("peak_fraction"),
                "gpu_memory_mb": _number("gpu_memory_mb"),
                "mlperf_share": _number(
                    "mlperf_share",
                    help="MLPerf Inference ResNet-50 offline, H200, TensorRT INT8: about 94,600 "
                    "samples/s per GPU; shown for ResNet-50-like models only (one 3x224x224 input, "
                    "49+ Conv nodes, 7-9 GFLOPs per image).",
                ),
            },
            key="distance_table",
            placeholder=EMPTY,
        )
    wrong = frame[frame["status"] == ResultStatus.WRONG_OUTPUTS.value]
    if not wrong.empty:  # timed, but not a speedup, a Pareto point or a recommendation
        computed = f"{counted(len(wrong), 'configuration')} computed wrong outputs"
        with st.expander(computed, expanded=True):
            st.dataframe(
                wrong[["label", "status", "cosine_similarity", "error"]],
                hide_index=True,
                placeholder=EMPTY,
            )
    failed = frame[~frame["status"].isin([ResultStatus.OK.value, ResultStatus.WRONG_OUTPUTS.value])]
    if not failed.empty:
        with st.expander(f"{counted(len(failed), 'configuration')} did not run"):
            st.dataframe(failed[["label", "status", "error"]], hide_index=True, placeholder=EMPTY)

    side_by_side = runtimes_side_by_side(frame)
    if not side_by_side.empty:
        st.subheader("Runtimes side by side")
        st.caption(
            "One row per precision and batch. Every accuracy is against the same FP32 reference "
            "(ONNX Runtime's CPU on the uploaded model); 'vs FP32' is ONNX Runtime FP32's p50 at "
            "that batch divided by the cell's; 'ran as' is what the runtime says it executed."
        )
        number = st.column_config.NumberColumn
        st.dataframe(
            side_by_side,
            hide_index=True,
            column_config={
                c: number(format="%.2fx" if "vs FP32" in c else "%.4f" if "·" in c else None)
                for c in side_by_side.columns
                if side_by_side[c].dtype.kind == "f"
            },
            key="runtimes_side_by_side",
            placeholder=EMPTY,
        )

    across_targets = targets_side_by_side(frame)
    if not across_targets.empty:
        st.subheader("Hardware targets side by side")
        st.caption(
            "The same configuration on each cluster target; 'speed vs first' is the first "
            "target's p50 divided by the cell's. The Jobs page says which node ran each one."
        )
        st.dataframe(across_targets, hide_index=True, key="targets_side_by_side", placeholder=EMPTY)

    # on_click="ignore": a download reruns nothing. On a rerun (Streamlit's default) the HTML
    # report's deferred file gets a new id and the one the browser holds is dropped, so clicking
    # it just after another download failed ("Deferred file ... not found").
    downloads = st.columns(3)
    downloads[0].download_button(
        "CSV",
        exports.export_csv(view),
        "optiboard-results.csv",
        "text/csv",
        icon="⬇️",
        key="download_csv",
        on_click="ignore",
    )
    downloads[1].download_button(
        "JSON",
        exports.export_json(view),
        "optiboard-results.json",
        "application/json",
        icon="⬇️",
        key="download_json",
        on_click="ignore",
    )

    def report() -> str:  # the same builder as `optiboard export --format html`
        samples = _samples(tuple(measured["result_id"]))
        return htmlreport.report_html(view, job_ids, baseline, loss_label, cost_key, samples)

    downloads[2].download_button(
        "HTML report",
        report,
        "optiboard-report.html",
        "text/html",
        icon="📄",
        key="download_report",
        on_click="ignore",
    )


comparison()
