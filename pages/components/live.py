"""Live parts of pages: fragments that rerun while work is queued or running, idle otherwise."""

from __future__ import annotations

import streamlit as st

from backend.queue import progress

# While something is queued or running, live parts of pages rerun this often (seconds).
LIVE_REFRESH_SECONDS = 2.0


def work_in_progress() -> bool:
    """True while any job is queued or running: the signal for pages to refresh themselves."""
    return progress.work_in_progress()


def refresh_every(active: bool) -> float | None:
    """The run_every of a live fragment: refresh while work runs, stop once nothing does."""
    return LIVE_REFRESH_SECONDS if active else None


def rerun_if_changed(was_active: bool) -> None:
    """Inside a live fragment: a full rerun when work started or stopped, to re-decide refresh."""
    if work_in_progress() != was_active:
        st.rerun()
