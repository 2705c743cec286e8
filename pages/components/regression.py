"""Compare's view of regression checks (?view=regression&jobs=ID): each model's verdict in one
line and, for several models, the overall line; then per model and configuration, runtime
environment A against B, the bootstrap interval of the ratio of medians and the verdict (with how
many processes each side was measured in and each one's median), the outputs of B against A, and
where B is slower the ops whose time changed most. Widgets only; backend/jobs/regressview.py
reads the stored pairs and backend/reporting/regression.py holds the numbers."""

from __future__ import annotations

import streamlit as st

from backend.auth.roles import Permission
from backend.jobs.regressspec import RegressionSpec
from backend.jobs.regressview import (
    PairRow,
    loaded_lines,
    pair_rows,
    ratio_said,
    rule_said,
    summary_lines,
)
from backend.queue import jobs
from backend.reporting import frames
from backend.reporting import regression as stats
from pages.access import link_scope
from pages.components.formatting import EMPTY, plain
from pages.components.gate import require_access
from pages.components.live import refresh_every
from pages.components.url_state import bound_selectbox, url_ids
from pages.components.widgets import job_label

ICONS = {
    stats.SLOWER: "🔻",
    stats.FASTER: "🔺",
    stats.SAME: "🟰",
    stats.UNCLEAR: "❔",  # the interval reaches past the smallest change
    stats.TOO_FEW: "⏳",  # no verdict: measure longer
    "failed": "❌",
}


def regression_comparison() -> None:
    """Pick one regression check; its table, verdict lines and op diffs, live while it runs."""
    wanted = url_ids("jobs")
    available = link_scope(frames.comparable_jobs(include=wanted, regression=True))
    if available.empty:
        st.info(
            "No regression checks yet. Run `optiboard regress MODEL --env-b ort-1.31` (or "
            "--submit it); each configuration is measured on both runtime environments.",
            icon="📊",
        )
        return
    meta = available.set_index("job_id")
    job_id = bound_selectbox(
        "Regression check",
        meta.index.tolist(),
        "jobs",
        default=meta.index.tolist()[0],
        format_func=job_label(meta),
    )
    active = bool(meta.loc[job_id, "state"] in ("queued", "running"))
    live_check(int(job_id), active)


def live_check(job_id: int, active: bool) -> None:
    @st.fragment(run_every=refresh_every(active))
    def draw() -> None:
        require_access(Permission.COMPARE)  # a timed fragment rerun skips the page's first line
        job = jobs.get_job(job_id)
        spec = RegressionSpec.from_dict(job.spec)
        rows = pair_rows(spec, jobs.stored_results(job_id), job.model_id)
        several = len(spec.model_ids(job.model_id)) > 1
        st.caption(
            plain(
                f"A = {spec.env_a}, B = {spec.env_b}"
                + (f" running model {spec.model_b}" if spec.model_b else "")
                + f"; {spec.confidence:.0%} bootstrap interval of {ratio_said(spec)} from "
                f"{spec.resamples:,} seeded resamples of the raw samples, timed interleaved "
                f"(A B A B ...), {rule_said(spec)}."
            )
        )
        if not rows:
            st.info("No configuration measured yet." if active else "This check stored nothing.")
            return
        for line in summary_lines(spec, rows, job.model_id):
            st.markdown(plain(line))
        table = [_table_row(r, several) for r in rows]
        st.dataframe(table, hide_index=True, key=f"regress-{job_id}", placeholder=EMPTY)
        for line in loaded_lines(spec, rows):
            st.caption(plain(line))
        for r in rows:
            _details(r, several)

    draw()


def _table_row(r: PairRow, several: bool) -> dict[str, object]:
    iv = r.interval
    return {
        **({"model": r.model} if several else {}),
        "configuration": r.configuration,
        "verdict": f"{ICONS.get(r.verdict, '')} {r.verdict}",
        "A": f"{r.env_a} {r.version_a}",
        "B": f"{r.env_b} {r.version_b}",
        "A p50 ms": iv.median_a_ms if iv else None,
        "B p50 ms": iv.median_b_ms if iv else None,
        "B/A": iv.ratio if iv else None,
        "interval": f"[{iv.low:.3f}, {iv.high:.3f}]" if iv and r.judged else "",
        "samples A/B": f"{iv.samples_a}/{iv.samples_b}" if iv else "",
        "processes A/B": "/".join(map(str, iv.processes())) if iv else "",
        "cosine B~A": r.cosine,
        "max abs B-A": r.max_abs,
    }


def _details(r: PairRow, several: bool) -> None:
    """The verdict's sentence; for a slower configuration the op diff, open."""
    which = f"{r.model} {r.configuration}" if several else r.configuration
    if r.error:
        st.error(plain(f"{which}: {r.error}"))
        return
    which_said = f"{r.model}: {r.line}" if several else r.line
    st.markdown(f"{ICONS.get(r.verdict, '')} {plain(which_said)}")
    if not r.diff.get("changes"):
        return
    with st.expander(f"Per-op profile, A -> B: {which}", expanded=r.verdict == stats.SLOWER):
        st.caption(
            "Op types by how much their time per profiled run moved (a separate profiled pass "
            "on each side: shares, not latency); new: only B ran it, vanished: only A."
        )
        st.dataframe(r.diff["changes"], hide_index=True, placeholder=EMPTY)
        for line in r.diff.get("lines", [])[3:]:
            st.caption(plain(line))
