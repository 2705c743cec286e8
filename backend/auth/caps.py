"""Caps checked when a job is queued, so one user or one sweep cannot fill the queue.

Every submit (sweep, search, serving study; from a page or the CLI) runs inside an audited action,
which names its actor (backend.auth.actor.current_actor); the job is credited to that actor and
counted against OPTIBOARD_MAX_QUEUED_JOBS_PER_USER.
"""

from __future__ import annotations

import settings
from backend.auth.actor import current_actor
from backend.counts import counted
from backend.errors import UserError


def check_configurations(configurations: int) -> None:
    """Refuse a sweep holding more than OPTIBOARD_MAX_CONFIGS_PER_JOB configurations."""
    most = settings.MAX_CONFIGS_PER_JOB.get()
    if configurations > most:
        raise UserError(
            f"This sweep holds {configurations} configurations, more than the {most} one job may "
            "hold (OPTIBOARD_MAX_CONFIGS_PER_JOB); choose fewer precisions, providers or batches."
        )


def check_queued() -> None:
    """Refuse a submitter who already has OPTIBOARD_MAX_QUEUED_JOBS_PER_USER jobs queued."""
    # here, not above: the job specs import caps, and the CLI's parser imports them
    from storage.repo import jobs as job_store

    who, cap = current_actor(), settings.MAX_QUEUED_JOBS_PER_USER.get()
    if who and job_store.count_queued_jobs(who) >= cap:
        raise UserError(
            f"{who} already has {counted(cap, 'job')} waiting for a worker, the most one user may "
            "queue (OPTIBOARD_MAX_QUEUED_JOBS_PER_USER); wait for some to start, or cancel some."
        )
