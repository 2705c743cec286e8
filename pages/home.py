"""Home: what is here, what is running, which workers are alive, and one obvious way to start."""

from __future__ import annotations

import streamlit as st

from backend.auth.roles import Permission
from backend.forms.compare import job_view
from backend.models import library
from backend.models.accepted import ACCEPTED_UPLOADS
from backend.queue import jobs, progress
from backend.records import JobRow, JobState, WorkerRow, job_kind, utcnow
from pages.components.baselines import drift_flags
from pages.components.formatting import EMPTY, fmt_ago, fmt_bytes, fmt_count, plain
from pages.components.gate import require_access
from pages.components.live import refresh_every, rerun_if_changed, work_in_progress
from pages.components.widgets import page_header

require_access(Permission.BROWSE)  # before anything is drawn or read: components/gate.py

page_header("Optiboard", "Upload a model, sweep precisions and providers, compare the results.")

models = library.list_models()
if not models:
    st.info(f"Nothing here yet. Start by uploading {ACCEPTED_UPLOADS}.", icon="👋")
    st.page_link("pages/models.py", label="Upload your first model", icon="⬆️")


ACTIVE = work_in_progress()


def guards(workers: list[WorkerRow]) -> None:
    """What untrusted models run under on each worker's host: one line per distinct answer,
    a warning where a guard is missing (backend/launch/isolation.py)."""
    by_answer: dict[tuple[str, bool], list[str]] = {}
    for w in workers:
        said = w.hardware.get("isolation") or {}
        answer = said.get("summary", "not reported (a worker of an older version)")
        by_answer.setdefault((answer, bool(said.get("complete"))), []).append(w.id)
    for (answer, complete), ids in by_answer.items():
        line = plain(f"Untrusted models run under: {answer} ({', '.join(ids)}).")
        if complete:
            st.caption(line)
        else:
            st.warning(line, icon="🟠")


@st.fragment(run_every=refresh_every(ACTIVE))
def overview() -> None:
    require_access(Permission.BROWSE)  # a timed fragment rerun skips the page's first line
    rerun_if_changed(ACTIVE)
    counts = progress.job_counts()
    cols = st.columns(4)
    cols[0].metric("Models", len(library.list_models()))
    cols[1].metric("Jobs running", counts.running)
    cols[2].metric("Jobs queued", counts.queued)
    cols[3].metric("Jobs finished", counts.finished)
    if models:
        st.page_link("pages/models.py", label="Upload another model", icon="⬆️")

    now = utcnow()
    st.subheader("Workers")
    workers = jobs.list_workers()
    if not workers:
        st.warning(
            "No worker is alive, so queued jobs wait. Start one on any machine that shares the "
            "database: `python -m backend.queue.worker`.",
            icon="🟠",
        )
    else:
        st.dataframe(
            [
                {
                    "worker": w.id,
                    "host": w.hostname,
                    "CPU": w.hardware.get("cpu", "?"),
                    "threads": w.hardware.get("cpu_count_logical"),
                    "memory": fmt_bytes((w.hardware.get("memory_total_mb") or 0) * 2**20),
                    "GPUs": ", ".join(
                        g.get("name", "?") if isinstance(g, dict) else str(g)
                        for g in w.hardware.get("gpus") or []
                    )
                    or "none",
                    "providers": ", ".join(
                        f"{runtime}:{p['name']}"
                        for runtime, statuses in (w.providers or {}).items()
                        for p in statuses
                        if isinstance(p, dict) and p.get("available")
                    ),
                    "busy with": f"job {w.current_job_id}" if w.current_job_id else "idle",
                    "last heartbeat": fmt_ago(w.heartbeat_at, now),
                }
                for w in workers
            ],
            hide_index=True,
            placeholder=EMPTY,
        )
        guards(workers)

    drift_flags("home-drift")
    st.subheader("Latest jobs")
    recent = jobs.list_jobs(limit=8)
    if not recent:
        st.caption("No jobs yet. Pick a model on the Optimize page and submit a sweep.")
        if models:
            st.page_link("pages/optimize.py", label="Optimize a model", icon="🛠️")
        return
    names = {m.id: m.name for m in models}
    st.dataframe(
        [
            {
                "job": j.id,
                "model": names.get(j.model_id, j.model_id),
                "label": j.label or "",
                "state": j.state.value,
                "progress": progress.progress_of(j, now).fraction,
                "configurations": j.progress_total,
                "created": fmt_ago(j.created_at, now),
            }
            for j in recent
        ],
        hide_index=True,
        column_config={
            "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0)
        },
        placeholder=EMPTY,
    )
    linked = _job_to_compare(recent)
    if linked is not None:
        ended = "" if linked.state == JobState.SUCCEEDED else f" ({linked.state.value})"
        page, query = job_view(job_kind(linked), linked.id)  # a generation job: Compare's own view
        st.page_link(
            f"pages/{page}.py",
            label=f"{'Open' if page == 'serve' else 'Compare'} the results of job {linked.id}"
            + ended,
            icon="📊",
            query_params=query,
        )


def _job_to_compare(recent: list[JobRow]) -> JobRow | None:
    """The newest succeeded job with results, else the newest with any (a cancelled or running
    one's partial results), so a cancelled retry does not hide the finished sweep before it."""
    with_results = [j for j in recent if j.progress_done]
    succeeded = [j for j in with_results if j.state == JobState.SUCCEEDED]
    return (succeeded or with_results or [None])[0]


overview()

if models:
    st.subheader("Models")
    st.dataframe(
        [
            {
                "model": m.name,
                "format": m.format,
                "opset": m.opset,
                "size": fmt_bytes(m.size_bytes),
                "parameters": fmt_count(m.parameter_count),
                "added (UTC)": m.created_at.strftime("%Y-%m-%d %H:%M"),
            }
            for m in models[:10]
        ],
        hide_index=True,
        placeholder=EMPTY,
    )
