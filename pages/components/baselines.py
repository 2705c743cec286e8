"""Baselines on Home and Jobs: drift beyond the interval flagged with its numbers and a link to
the comparison, and on a job's page the control to pin, unpin and re-run it (editors, admins)."""

from __future__ import annotations

import streamlit as st

from backend import baselines
from backend.auth.audit import Action
from backend.auth.roles import Permission
from backend.counts import counted
from backend.errors import UserError
from backend.records import JobKind, JobRow, JobState
from backend.reporting import regression as stats
from backend.runtimeenvs import describe
from pages.access import cannot, guarded
from pages.components.formatting import EMPTY, plain
from pages.components.url_state import set_url
from pages.components.widgets import show_error

VERDICT_ICONS = {
    stats.SLOWER: "🔻 slower",
    stats.FASTER: "🔺 faster",
    stats.SAME: "same",
    stats.UNCLEAR: "❔ unclear",  # the interval reaches past the smallest change
    stats.TOO_FEW: "⏳ too few samples",  # no verdict: neither drift nor the same
}


def drift_rows(found: list[baselines.Drift]) -> list[dict[str, object]]:
    """One table row per configuration; too few samples: that verdict and no interval."""
    return [
        {
            "baseline": d.baseline_id,
            "re-run": d.rerun_id,
            "configuration": d.label,
            "verdict": VERDICT_ICONS.get(d.verdict, d.verdict),
            "ratio": d.interval.ratio,
            "interval": f"[{d.interval.low:.3f}, {d.interval.high:.3f}] at "
            f"{d.interval.confidence:.0%}"
            if d.verdict != stats.TOO_FEW
            else "",
            "environments": f"{d.env_baseline} → {d.env_rerun}",
            "comparison": f"compare?jobs={d.baseline_id},{d.rerun_id}",
        }
        for d in found
    ]


def drift_table(found: list[baselines.Drift], key: str) -> None:
    st.dataframe(
        drift_rows(found),
        hide_index=True,
        column_config={
            "ratio": st.column_config.NumberColumn(
                "re-run / baseline", format="%.3f", help="median of the re-run over the baseline's"
            ),
            "comparison": st.column_config.LinkColumn("comparison", display_text="compare"),
        },
        key=key,
        placeholder=EMPTY,
    )
    st.caption(f"Each re-run is judged {baselines.METHOD}.")


def drift_flags(key: str) -> None:
    """The newest re-run of every baseline whose configurations left the interval; nothing when
    none did."""
    flagged = baselines.flagged_drift()
    if not flagged:
        return
    jobs_hit = sorted({d.baseline_id for d in flagged})
    slower = sum(d.verdict == stats.SLOWER for d in flagged)
    ways = ", ".join(
        f"{n} {word}" for n, word in ((slower, "slower"), (len(flagged) - slower, "faster")) if n
    )
    # a warning where something got slower; drift that only got faster is news, not a warning
    (st.warning if slower else st.info)(
        f"Drift beyond the interval: {counted(len(flagged), 'configuration')} of "
        f"{'baseline job' if len(jobs_hit) == 1 else 'baseline jobs'} "
        f"{', '.join(map(str, jobs_hit))} moved in "
        f"{'its newest re-run' if len(jobs_hit) == 1 else 'their newest re-runs'} ({ways}).",
        icon="📉" if slower else "📈",
    )
    drift_table(flagged, key)


def baseline_control(job: JobRow) -> None:
    """Pin / unpin a succeeded sweep and re-run a pinned one; the drift of this job's re-runs."""
    if job.kind != JobKind.SWEEP or job.state != JobState.SUCCEEDED:
        return
    pinned = baselines.is_pinned(job.id)
    baseline_of = baselines.baseline_of(job)
    title = "Baseline · pinned" if pinned else "Baseline"
    with st.expander(title, expanded=bool(pinned or baseline_of)):
        if baseline_of:
            st.markdown(f"A re-run of baseline job {baseline_of}.")
            try:
                drift_table(baselines.drift(baseline_of, job.id), f"drift-of-{job.id}")
            except UserError as exc:  # the baseline went with its model
                show_error(exc)
        why_not = cannot("pin or re-run a baseline", Permission.SUBMIT)
        allowed = why_not is None
        if why_not is not None:  # the greyed-out buttons below say nothing by themselves
            st.caption(why_not)
        cols = st.columns([2, 2, 2], vertical_alignment="bottom")
        action = Action.BASELINE_UNPIN if pinned else Action.BASELINE_PIN
        label = "Unpin baseline" if pinned else "Pin as baseline"
        if cols[0].button(label, key=f"pin_{job.id}", disabled=not allowed, help=why_not):
            try:
                with guarded(action, f"job {job.id}"):
                    (baselines.unpin if pinned else baselines.pin)(job.id)
            except UserError as exc:
                show_error(exc)
            else:
                st.rerun()
        if not pinned:
            return
        names = [e["name"] for e in describe() if e["state"] == "ready"]
        own = baselines.env_of(job)
        env = cols[1].selectbox(
            "Environment",
            names,
            index=names.index(own) if own in names else 0,
            key=f"rerun_env_{job.id}",
        )
        if cols[2].button("Re-run", key=f"rerun_{job.id}", disabled=not allowed, help=why_not):
            try:
                with guarded(Action.SUBMIT, f"job {job.id}", baseline_rerun=env):
                    new = baselines.rerun(job.id, env=env)
            except UserError as exc:
                show_error(exc)
            else:
                set_url("job", new.id)
                st.toast(f"Queued job {new.id}, a re-run of baseline {job.id} on {plain(env)}.")
                st.rerun()
        runs = baselines.reruns(job.id)
        if runs:
            st.caption("Re-runs: " + ", ".join(f"job {r.id} ({r.state.value})" for r in runs[:10]))
