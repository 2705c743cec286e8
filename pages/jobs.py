"""Jobs: a live table of sweeps, and for one job its configurations, log, cancel and retry."""

from __future__ import annotations

from collections import Counter
from urllib.parse import quote

import pandas as pd
import streamlit as st

from backend import viewer
from backend.auth.audit import Action
from backend.auth.roles import Permission
from backend.counts import counted
from backend.engine.profile import Profile, stored_profile
from backend.errors import UserError
from backend.jobs.knee import knee_summary
from backend.models import library
from backend.queue import jobs, progress
from backend.records import JobKind, JobRow, JobState, is_serving, utcnow
from backend.reporting import profilecharts
from backend.reporting.metrics import pick
from backend.results import ResultStatus, StoredResult, fp32_baseline
from backend.specs import SweepSpec
from pages.access import can, cannot, guarded
from pages.components.baselines import baseline_control, drift_flags
from pages.components.formatting import EMPTY, fmt_duration, plain
from pages.components.gate import require_access
from pages.components.generation import job_points
from pages.components.live import refresh_every, rerun_if_changed, work_in_progress
from pages.components.url_state import (
    bound_multiselect,
    link_note,
    not_a_number,
    set_url,
    url_int,
    url_value,
)
from pages.components.widgets import metric_row, page_header, show_error, why_in_full

require_access(Permission.BROWSE)  # before anything is drawn or read: components/gate.py

ENERGY, IDLE = pick("j_per_sample", "idle_w")  # the energy columns (backend/energy)

STATE_ICONS = {
    "queued": "⏳ queued",
    "running": "▶️ running",
    "succeeded": "✅ succeeded",
    "failed": "❌ failed",
    "cancelled": "⏹️ cancelled",
}

page_header("Jobs", "Every sweep with its progress; pick one for its configurations and log.")

models = {m.id: m for m in library.list_models()}
ACTIVE = work_in_progress()

filters = st.columns([2, 2])
with filters[0]:
    states = bound_multiselect(
        "States", [s.value for s in JobState], "states", format_func=lambda v: STATE_ICONS[v]
    )
with filters[1]:
    model_filter = bound_multiselect(
        "Models",
        list(models),
        "models",
        format_func=lambda mid: f"{models[mid].name} (#{mid})",
    )


def _jobs_frame(rows: list[JobRow]) -> pd.DataFrame:
    now = utcnow()
    done = [progress.progress_of(j, now) for j in rows]
    return pd.DataFrame(
        {
            "job": [j.id for j in rows],
            "model": [models[j.model_id].name if j.model_id in models else "?" for j in rows],
            "label": [j.label or "" for j in rows],
            "state": [STATE_ICONS[j.state.value] for j in rows],
            "progress": [p.fraction for p in done],
            "configurations": [p.text for p in done],
            "duration": [fmt_duration(p.duration_s) for p in done],
            "created": [j.created_at for j in rows],
            "attempts": [j.attempts for j in rows],
            "error": [p.last_error for p in done],
        }
    )


@st.fragment(run_every=refresh_every(ACTIVE))
def job_table() -> None:
    require_access(Permission.BROWSE)  # a timed fragment rerun skips the page's first line
    rerun_if_changed(ACTIVE)
    rows = jobs.list_jobs(states=[JobState(s) for s in states] or None)
    if model_filter:
        rows = [j for j in rows if j.model_id in set(model_filter)]
    if not rows:
        if states or model_filter:
            st.info("No jobs match these filters.")
        else:
            st.info("No jobs yet. Submit a sweep on the Optimize page.", icon="🛠️")
            st.page_link("pages/optimize.py", label="Optimize a model", icon="🛠️")
        return
    counts = progress.job_counts()
    st.caption(
        " · ".join(f"{STATE_ICONS[s.value]}: {counts.by_state[s]}" for s in JobState)
        + (" · refreshing every few seconds" if ACTIVE else "")
    )
    event = st.dataframe(
        _jobs_frame(rows),
        hide_index=True,
        height=min(420, 38 + 35 * len(rows)),
        column_config={
            "progress": st.column_config.ProgressColumn(
                "progress", min_value=0.0, max_value=1.0, format="percent"
            ),
            "created": st.column_config.DatetimeColumn("created (UTC)", format="YYYY-MM-DD HH:mm"),
        },
        on_select="rerun",
        selection_mode="single-row",
        key="job_table",
        placeholder=EMPTY,
    )
    picked = event.selection.rows if event is not None else []
    if picked:
        chosen = int(rows[picked[0]].id)
        if chosen != url_int("job"):
            set_url("job", chosen)
            st.rerun()


job_table()
drift_flags("jobs-drift")

job_id = url_int("job")
if (wrong := not_a_number("job", "job")) is not None:  # never another job in its place
    link_note(f"{wrong}; no job is shown: click a row above to see one.")
    st.stop()
if job_id is None:
    recent = jobs.list_jobs(limit=1)
    if not recent:
        st.stop()
    job_id = recent[0].id
    st.caption("Click a row above to see another job.")


@st.fragment  # picking a configuration redraws these views only; the detail refreshes them
def profile_views(job_id: int, profiled: list[StoredResult], model_id: int) -> None:
    """Per-node bars, op types and the diff against FP32, for configurations run with --profile."""
    require_access(Permission.BROWSE)  # a fragment rerun skips the page's first line
    if not profiled:
        return
    if old := progress.untraced_profiles(profiled):  # the Graph page's sentence, one test of it
        st.warning(plain(old), icon="🔁")
    wanted = url_value("profile")  # a configuration key, from the Graph page's variant diff
    with st.expander(f"Per-node profiles ({len(profiled)})", expanded=wanted is not None):
        st.caption(
            "A separate profiled pass after the clean timing; times are shares, not latency."
        )
        by_label = {s.configuration.label: s for s in profiled}
        if len(by_label) < len(profiled):  # two configurations share a label: show keys
            by_label = {s.config_key: s for s in profiled}
        labels = list(by_label)
        start = next((i for i, k in enumerate(labels) if by_label[k].config_key == wanted), 0)
        chosen = by_label[st.selectbox("Configuration", labels, index=start, key="profile")]
        profile = stored_profile(chosen.result.telemetry)
        if profile is None:
            return
        tabs = st.tabs(["Nodes", "Op types", "Against FP32", "Hottest nodes"])
        tabs[0].plotly_chart(profilecharts.node_bars(profile), key=f"nodes-{job_id}")
        with tabs[3]:
            hottest_nodes(profile, model_id, chosen.id)
        tabs[1].plotly_chart(profilecharts.op_type_bars(profile), key=f"ops-{job_id}")
        baseline = fp32_baseline(profiled, chosen.configuration)
        fp32 = stored_profile(baseline.result.telemetry) if baseline else None
        if baseline is chosen:  # the FP32 run itself: nothing to hold it against
            tabs[2].caption(
                f"{plain(chosen.configuration.label)} is the FP32 run itself; pick a configuration "
                "of another precision to see its time per uploaded node against this one."
            )
        elif fp32 is None:
            tabs[2].caption("No profiled FP32 run of the same provider and batch in this job.")
        else:
            figure = profilecharts.diff_bars(fp32, profile, ("FP32", chosen.configuration.label))
            tabs[2].plotly_chart(figure, key=f"diff-{job_id}")


@st.cache_data(show_spinner=False, max_entries=16)
def _focus_keys(model_id: int) -> dict[str, str]:
    return viewer.focus_keys(library.onnx_path(model_id))


def hottest_nodes(profile: Profile, model_id: int, result_id: int) -> None:
    """The hottest nodes, each linked to the Graph page's Netron view with it selected and the
    graph coloured by this result's time shares."""
    rows = profilecharts.hottest_rows(profile, _focus_keys(model_id))
    untraced = sum(row["uploaded_node"] is None for row in rows)
    view = f"graph?model={model_id}&overlay=time&result={result_id}"
    for row in rows:
        focus = row.pop("focus")
        row["graph"] = f"{view}&node={quote(focus, safe='')}" if focus else None
    st.dataframe(
        rows,
        hide_index=True,
        column_config={
            "us_per_run": st.column_config.NumberColumn("us per run", format="%.1f"),
            "share": st.column_config.NumberColumn("share", format="percent"),
            "own_share": st.column_config.NumberColumn(
                "own share", format="percent", help="Less the nodes of its branches (an If's own)"
            ),
            "inside": st.column_config.TextColumn(
                "inside", help="The If (Loop) whose share already includes this node's"
            ),
            "uploaded_node": st.column_config.TextColumn("uploaded node"),
            "graph": st.column_config.LinkColumn("Netron", display_text="open in Graph"),
        },
        key=f"hottest-{model_id}",
        placeholder=EMPTY,
    )
    st.caption(
        "Each link opens the uploaded graph in Netron with that node selected, coloured by "
        "this configuration's time share per node."
        + (
            " A node inside an If or Loop branch shows its share of the total, already counted "
            "in the share of the node it ran inside; that node's own share leaves it out."
            if any(row["inside"] for row in rows)
            else ""
        )
        + (
            f" {counted(untraced, 'node')} without an uploaded node (–): traced to no node of "
            "the uploaded main graph (a node inside an If or Loop branch, whose time its "
            "parent's includes, or one the runtime added); Against FP32 leaves "
            f"{'it' if untraced == 1 else 'them'} out too."
            if untraced
            else ""
        )
    )
    st.page_link(
        "pages/graph.py",
        label="Graph coloured by accuracy loss (SQNR)",
        icon="🎯",
        query_params={"model": model_id, "overlay": "sqnr"},
    )


def mixed_search(job: JobRow, spec: SweepSpec | None, stored: list[StoredResult]) -> None:
    """One click: search the fastest INT8/FP32 mix meeting a bound, as a new job (editors);
    `spec` is the job's sweep (None: not a sweep, or one that can no longer be read)."""
    int8 = [
        s
        for s in stored
        if s.measured  # wrong outputs too: a search may repair them
        and s.configuration.precision.value == "int8_static"
        and s.configuration.backend == "onnxruntime"
    ]
    if spec is None or not int8 or spec.search_bound:
        return
    with st.expander("Mixed precision: search the fastest INT8/FP32 mix"):
        st.caption(
            "Keeps the nodes that lose the most accuracy in FP32 until the bound is met, then "
            "tries the profile's costly float islands; every step is measured and stored as a "
            "configuration of a new job, and joins the accuracy-vs-speed chart on Compare."
        )
        cols = st.columns([2, 2, 3], vertical_alignment="bottom")
        metric = cols[0].selectbox(
            "Bound on",
            ["cosine", "top1"],
            format_func={"cosine": "cosine to FP32", "top1": "top-1 agreement"}.get,
            key=f"search_metric_{job.id}",
        )
        minimum = cols[1].number_input(
            "At least", 0.5, 1.0, 0.99, step=0.005, format="%.3f", key=f"search_min_{job.id}"
        )
        why_not = cannot("start a mixed-precision search", Permission.SUBMIT)
        if why_not is not None:  # a greyed-out button says nothing by itself
            st.caption(why_not)
        if cols[2].button("Search mixed precision", key=f"search_{job.id}", disabled=bool(why_not)):
            bound = f"{metric}={minimum:g}"
            try:
                with guarded(Action.SUBMIT, f"job {job.id}", search=bound):
                    new = jobs.submit_search(job.id, bound)
            except UserError as exc:
                show_error(exc)
            else:
                st.success(f"Queued job {new.id}: FP32, INT8 and each search step.", icon="✅")
                st.page_link(
                    "pages/jobs.py",
                    label=f"Follow job {new.id}",
                    icon="⏱️",
                    query_params={"job": new.id},
                )


def _configurations_table(
    job_id: int, configurations: list[progress.ConfigurationProgress]
) -> None:
    """One row per configuration with its figures; under it, what measured the energy."""
    st.markdown("**Configurations**")
    gpu = any(c.peak_fraction is not None for c in configurations)
    st.dataframe(
        [
            {
                "configuration": c.label,
                "status": c.status,
                "p50 ms": c.p50_ms,
                "p99 ms": c.p99_ms,
                "throughput /s": c.throughput,
                ENERGY.header: c.j_per_sample,
                IDLE.header: c.idle_w,
                "why / error": c.why,
                "key": c.key,
            }
            | ({"ran on": c.ran_on} if any(x.ran_on for x in configurations) else {})
            # GPU results only: a column of dashes on a CPU sweep says nothing
            | ({"of GPU peak": c.peak_fraction} if gpu else {})
            for c in configurations
        ],
        hide_index=True,
        column_config={
            "p50 ms": st.column_config.NumberColumn(format="%.3f"),
            "p99 ms": st.column_config.NumberColumn(format="%.3f"),
            "throughput /s": st.column_config.NumberColumn(format="%.1f"),
            "of GPU peak": st.column_config.NumberColumn(
                format="percent",
                help="Static FLOPs x samples/s over the device's dense peak for the precision run",
            ),
            ENERGY.header: st.column_config.NumberColumn(format=ENERGY.printf(), help=ENERGY.label),
            IDLE.header: st.column_config.NumberColumn(format=IDLE.printf(), help=IDLE.label),
        },
        key=f"configs_{job_id}",
        placeholder=EMPTY,
    )
    failed = {s.value for s in ResultStatus if s != ResultStatus.OK}
    why_in_full([(c.label, c.why, c.status in failed) for c in configurations], f"why_{job_id}")
    sources = sorted({c.energy_source for c in configurations if c.energy_source})
    if sources:  # what measured the energy columns, or why they are empty
        st.caption(f"{ENERGY.header}, {IDLE.header}: " + "; ".join(plain(s) for s in sources))


def job_detail(job_id: int) -> None:
    """The followed job's detail in a fragment of its own that reruns every few seconds while
    the job is queued or running, as the table above does, and not at all once it ended: its
    progress, configurations and log follow the worker instead of the last full rerun."""
    try:
        job = jobs.get_job(job_id)
    except UserError as exc:
        show_error(exc)
        return
    live = not job.state.finished
    st.fragment(_job_detail, run_every=refresh_every(live))(job.id, live)


def _job_detail(job_id: int, was_live: bool) -> None:
    """One drawing of the detail, from what is stored now; widget keys hold the job id only,
    so a timed rerun keeps what the user picked and typed."""
    require_access(Permission.BROWSE)  # a timed fragment rerun skips the page's first line
    try:
        job = jobs.get_job(job_id)
    except UserError as exc:  # deleted since the page was drawn
        show_error(exc)
        return
    if was_live and job.state.finished:
        st.rerun()  # the whole page: the table's row too, and this part stops polling
    state = progress.progress_of(job)
    stored = jobs.stored_results(job.id)  # once per redraw: the summary, the rows, the views
    _summary(job, state, stored)
    try:
        spec, configurations = progress.configuration_progress(job, stored)
    except UserError as exc:
        spec, configurations = None, []
        st.warning(f"This job's sweep can no longer be read: {plain(exc)}")
    # one row, each action as wide as its label (a quarter of the page cut "Run again with cha"
    # at 1100 px): Cancel first while the job runs, Retry last once it ended
    with st.container(horizontal=True, wrap=True):
        _cancel(job)
        _links(job, spec, state)
        _retry(job)

    if job.kind == JobKind.GENERATION:  # tokens: TTFT, ITL, tokens/s, memory, perplexity
        job_points(job.id, configurations)
    else:
        _configurations_table(job.id, configurations)
    baseline_control(job)
    if spec is not None and spec.find_knee:  # the knee search's answer, with its numbers
        knee_lines = knee_summary(spec, stored)
        if knee_lines:
            st.markdown("**Knee**\n\n" + "\n".join(f"- {plain(line)}" for line in knee_lines))
    profile_views(
        job.id, [s for s in stored if s.result.telemetry.get("profile_sha256")], job.model_id
    )
    mixed_search(job, spec, stored)
    # keyed: an identity of its own, so a live redraw (new results above it, the job ending)
    # does not close the log the user opened
    with st.expander("Log", expanded=job.state == JobState.FAILED, key=f"log_{job.id}"):
        events = jobs.job_events(job.id)
        if not events:
            st.caption("No log lines yet.")
        else:
            st.code(
                "\n".join(
                    f"{e.created_at:%H:%M:%S} {e.level.upper():7} {e.message}" for e in events
                ),
                language=None,
            )


def _summary(job: JobRow, state: progress.JobProgress, stored: list[StoredResult]) -> None:
    """Title, progress bar (with the configurations that did not measure ok: a succeeded job
    can hold failed rows), state, duration, attempts, worker, the latest warning, the error."""
    model = models.get(job.model_id)
    title = f"Job {job.id}" + (f" · {job.label}" if job.label else "")
    st.subheader(plain(f"{title} · {model.name if model else '?'}"))
    not_ok = Counter(r.status.value for r in stored if not r.ok)
    st.progress(
        state.fraction,
        text=f"{STATE_ICONS[job.state.value]} · {state.done} of "
        + counted(state.total, "point" if job.kind == JobKind.GENERATION else "configuration")
        + "".join(f" · {count} {status}" for status, count in not_ok.items()),
    )
    metric_row(
        [
            ("State", job.state.value),
            ("Duration", fmt_duration(state.duration_s)),
            ("Attempts", f"{job.attempts}/{job.max_attempts}"),
        ]
    )
    # a line, not a metric: host-pid-hex ids ("vm-22068-0a3d0f") were cut to "vm-220..."
    st.caption(f"Worker: {plain(job.worker_id or EMPTY)}")
    latest = jobs.job_events(job.id, limit=1)
    if not job.state.finished and latest and latest[0].level == "warning":
        st.warning(plain(latest[0].message))  # e.g. a Ray head the worker is waiting for
    if job.error:
        st.error(plain(state.last_error))
        if can(Permission.USERS):  # the traceback names server paths: admins (operators) only
            with st.expander("Full error"):
                st.code(job.error, language=None)


def _cancel(job: JobRow) -> None:
    """Cancel while the job runs, first in the row (a second click on it as the job ends lands
    on a link, never on Retry, which comes last); it reruns the page."""
    if not job.state.finished and can(Permission.CANCEL):
        if st.button("Cancel", key=f"cancel_{job.id}", icon="⏹️"):
            with guarded(Action.CANCEL, f"job {job.id}"):
                state = jobs.cancel_job(job.id)
            st.toast(jobs.cancel_said(job.id, state))
            st.rerun()


def _retry(job: JobRow) -> None:
    """Run again (or Retry) once the job ended, last in the row; it reruns the page."""
    if not job.state.finished:
        return
    if why := cannot("retry a job", Permission.SUBMIT):
        st.caption(why)  # a viewer: no Retry, and the reason where it would be
    elif st.button(  # a job that succeeded is not retried: it is run again as it was
        "Run again" if job.state == JobState.SUCCEEDED else "Retry",
        key=f"retry_{job.id}",
        icon="🔁",
    ):
        try:
            with guarded(Action.RETRY, f"job {job.id}"):
                new = jobs.retry_job(job.id)
        except UserError as exc:
            show_error(exc)
        else:
            set_url("job", new.id)
            st.toast(f"Queued job {new.id}, a copy of job {job.id}.")
            st.rerun()


def _links(job: JobRow, spec: SweepSpec | None, state: progress.JobProgress) -> None:
    """Run again with changes (a sweep), and where the job's results are drawn."""
    if spec is not None:
        st.page_link(
            "pages/optimize.py",
            label="Run again with changes",
            icon="✏️",
            query_params={
                "model": str(job.model_id),
                **jobs.spec_to_query(spec),
                "from_job": str(job.id),
            },
        )
    if state.done and is_serving(job):  # a serving study: its points are drawn on Serve
        st.page_link(
            "pages/serve.py", label="Open on Serve", icon="🚀", query_params={"study": job.id}
        )
    elif state.done:
        views = {JobKind.GENERATION: "generation", JobKind.REGRESSION: "regression"}
        view = views.get(job.kind)  # a kind this version does not know: the plain view
        generation = {"view": view} if view else {}
        st.page_link(
            "pages/compare.py",
            label="Compare results",
            icon="📊",
            query_params={**generation, "jobs": job.id},
        )


job_detail(job_id)
