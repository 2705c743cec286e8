"""Baselines: a finished sweep pinned, re-run later, and the re-run judged against it.

A re-run queues the pinned job's configurations again as a new sweep (on the same runtime
environment or another, on the same upload or a re-export), whose spec names its baseline
(baseline_of). Each configuration of the re-run is then compared with the pinned job's stored raw
samples: median(re-run) / median(baseline) with the same seeded percentile bootstrap and verdict
rule as a regression check (backend/reporting/regression.py). The two runs were timed at
different times, not interleaved, so drift of the host between them is not cancelled; every
comparison says so (METHOD), and a regression check (`optiboard regress`) is the way to tell
two environments apart on one host at one time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from backend.auth.actor import current_actor
from backend.errors import UserError
from backend.knobs.serialize import field_from_json
from backend.queue import jobs
from backend.records import JobKind, JobRow, JobState, get_job, stored_results
from backend.reporting import regression as stats
from backend.runtimeenvs import ready_env
from backend.specs import SweepSpec
from storage.repo import baselines as baseline_store
from storage.repo import jobs as job_store
from storage.repo.baselines import BaselineRow
from storage.repo.results import result_samples

METHOD = (
    "against the pinned job's stored samples (timed at another time, not interleaved: "
    "drift of the host between the runs is not cancelled)"
)


@dataclass(frozen=True)
class Drift:
    """One configuration of a re-run against its baseline."""

    baseline_id: int
    rerun_id: int
    config_key: str
    label: str
    interval: stats.RatioInterval
    verdict: str
    env_baseline: str
    env_rerun: str

    @property
    def flagged(self) -> bool:
        """Beyond the interval: slower or faster; not 'same', nor too few samples to judge."""
        return self.verdict in (stats.SLOWER, stats.FASTER)

    def line(self) -> str:
        i = self.interval
        which = (
            f"{self.label}: re-run {self.rerun_id} ({self.env_rerun}) / baseline "
            f"{self.baseline_id} ({self.env_baseline})"
        )
        if self.verdict == stats.TOO_FEW:
            return f"{which}: {stats.too_few_sentence(i, 'the baseline', 'the re-run')}"
        interval = f"[{i.low:.3f}, {i.high:.3f}] at {i.confidence:.0%}"
        return f"{which} = {i.ratio:.3f} {interval}: {self.verdict}"


def _pinnable(job: JobRow) -> None:
    if job.kind != JobKind.SWEEP:
        raise UserError(
            f"Job {job.id} is not a sweep; only a sweep's configurations can be pinned and re-run."
        )
    if job.state != JobState.SUCCEEDED:
        raise UserError(f"Job {job.id} is {job.state.value}; pin a job that succeeded.")
    if not any(r.measured for r in stored_results(job.id)):
        raise UserError(f"Job {job.id} has no measured configuration to compare against.")


def pin(job_id: int) -> BaselineRow:
    """Pin a succeeded sweep (call inside `audited(..., Action.BASELINE_PIN, ...)`)."""
    job = get_job(job_id)
    _pinnable(job)
    if not baseline_store.pin(job_id, current_actor() or "?"):
        raise UserError(f"Job {job_id} is already pinned as a baseline.")
    row = baseline_store.get(job_id)
    assert row is not None
    return row


def unpin(job_id: int) -> None:
    """Unpin; its re-runs stay as ordinary jobs."""
    if not baseline_store.unpin(job_id):
        raise UserError(f"Job {job_id} is not pinned as a baseline; `optiboard baseline list`.")


def list_baselines() -> list[BaselineRow]:
    return baseline_store.list_pinned()


def is_pinned(job_id: int) -> bool:
    return baseline_store.get(job_id) is not None


def rerun(
    job_id: int, env: str | None = None, model_id: int | None = None, held_by: str | None = None
) -> JobRow:
    """Queue the pinned job's configurations again on `env` (default: the baseline's own) and
    `model_id` (default: the same upload); refusals store nothing. held_by: created already
    claimed by that worker (the terminal running it, storage.repo.jobs.create_job)."""
    if not is_pinned(job_id):
        raise UserError(
            f"Job {job_id} is not pinned as a baseline; pin it first: "
            f"optiboard baseline pin {job_id}."
        )
    job = get_job(job_id)
    spec = SweepSpec.from_dict(job.spec)
    name = env or spec.runtime_env
    ready_env(name)
    spec = replace(spec, runtime_env=name, baseline_of=job_id)
    model = model_id or job.model_id
    label = f"re-run of baseline {job_id} on {name}" + (
        f" (model {model})" if model != job.model_id else ""
    )
    return jobs.submit_sweep(model, spec, label=label, held_by=held_by)


def reruns(job_id: int) -> list[JobRow]:
    """The baseline's re-runs, newest first."""
    return [j for j in job_store.jobs_after(job_id) if baseline_of(j) == job_id]


def baseline_of(job: JobRow) -> int | None:
    """The pinned job this sweep re-ran; None for any other job. Only that field of the stored
    sweep is read (as SweepSpec reads it), not the whole spec for every later job."""
    if job.kind != JobKind.SWEEP:
        return None
    pinned: int | None = field_from_json(SweepSpec, job.spec, "baseline_of")
    return pinned


def env_of(job: JobRow) -> str:
    """The runtime environment a sweep ran its children in (that field alone, as above)."""
    return str(field_from_json(SweepSpec, job.spec, "runtime_env"))


def drift(baseline_id: int, rerun_id: int) -> list[Drift]:
    """Every configuration measured in both, judged from their stored raw samples."""
    base, again = stored_results(baseline_id), stored_results(rerun_id)
    env_base, env_again = env_of(get_job(baseline_id)), env_of(get_job(rerun_id))
    by_key = {r.config_key: r for r in base if r.measured}
    pairs = [(by_key[r.config_key], r) for r in again if r.measured and r.config_key in by_key]
    samples = result_samples([s.id for pair in pairs for s in pair])
    out = []
    for a, b in pairs:
        a_ms = samples.get(a.id) or a.result.samples_ms
        b_ms = samples.get(b.id) or b.result.samples_ms
        if not a_ms or not b_ms:
            continue
        interval = stats.bootstrap_ratio(a_ms, b_ms)
        out.append(
            Drift(
                baseline_id,
                rerun_id,
                a.config_key,
                a.configuration.label,
                interval,
                stats.verdict(interval),
                env_base,
                env_again,
            )
        )
    return out


def latest_drift() -> list[Drift]:
    """For every pinned job, its newest finished re-run's configurations (all of them)."""
    found = []
    for pinned in list_baselines():
        done = [j for j in reruns(pinned.job_id) if j.state.finished and j.progress_done]
        if done:
            found.extend(drift(pinned.job_id, done[0].id))
    return found


def flagged_drift() -> list[Drift]:
    """What Home and Jobs flag: configurations whose newest re-run left the interval."""
    return [d for d in latest_drift() if d.flagged]
