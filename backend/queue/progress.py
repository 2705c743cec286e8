"""How far jobs have come: counts by state, fractions, durations and per-configuration status.

Pages render these; the arithmetic (and what "pending" or "not run" means) lives here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from backend.engine.profile import stored_profile, untraced_note, untraced_sentence
from backend.errors import UserError, last_line
from backend.jobs.knee import skip_reason
from backend.queue import jobs
from backend.records import JobKind, JobRow, JobState, job_kind, utcnow
from backend.reporting import distance
from backend.reporting.provenance import ran_on
from backend.results import ConfigurationResult, StoredResult
from backend.serving.study import (
    ServingStudy,
    configuration_label,
    load_label,
    point_key,
)
from backend.serving.types import LoadPoint
from backend.serving.view import ran_label
from backend.specs import SweepSpec
from storage.repo import serving as serving_store


@dataclass(frozen=True)
class JobCounts:
    """Jobs per state, and the totals the Home page shows."""

    by_state: dict[JobState, int]

    @property
    def queued(self) -> int:
        return self.by_state.get(JobState.QUEUED, 0)

    @property
    def running(self) -> int:
        return self.by_state.get(JobState.RUNNING, 0)

    @property
    def finished(self) -> int:
        return sum(n for state, n in self.by_state.items() if state.finished)

    @property
    def active(self) -> bool:
        return bool(self.queued or self.running)


def job_counts() -> JobCounts:
    counts = jobs.job_counts()
    return JobCounts({state: counts.get(state.value, 0) for state in JobState})


def work_in_progress() -> bool:
    """True while any job is queued or running: the signal for pages to keep refreshing."""
    return job_counts().active


@dataclass(frozen=True)
class JobProgress:
    """One job's progress as a fraction, "done/total" and how long it has run."""

    done: int
    total: int
    fraction: float
    duration_s: float | None
    last_error: str

    @property
    def text(self) -> str:
        return f"{self.done}/{self.total}"


def progress_of(job: JobRow, now: datetime | None = None) -> JobProgress:
    """Progress of one job; a running job's duration counts up to now (naive UTC)."""
    duration = None
    if job.started_at is not None:
        duration = ((job.finished_at or now or utcnow()) - job.started_at).total_seconds()
    fraction = job.progress_done / job.progress_total if job.progress_total else 0.0
    if job.state == JobState.SUCCEEDED:  # done, though a knee search left batches out
        fraction = 1.0
    return JobProgress(
        done=job.progress_done,
        total=job.progress_total,
        fraction=fraction,
        duration_s=duration,
        last_error=last_line(job.error),
    )


@dataclass(frozen=True)
class ConfigurationProgress:
    """One configuration of a job's sweep: its result if stored, else pending or not run."""

    label: str
    key: str
    status: str
    p50_ms: float | None = None
    p99_ms: float | None = None
    throughput: float | None = None
    why: str = ""
    ran_on: str = ""  # cluster runs: target · host · node (· GPU)
    peak_fraction: float | None = None  # GPU results: achieved FLOP/s over the device's peak
    j_per_sample: float | None = None  # median of the timed windows (backend/energy)
    idle_w: float | None = None
    energy_source: str = ""  # what measured the energy, or why it is not measurable here


def _from_result(label: str, key: str, result: ConfigurationResult) -> ConfigurationProgress:
    latency = result.latency
    return ConfigurationProgress(
        label=label,
        key=key,
        status=result.status.value,
        p50_ms=latency.p50 if latency else None,
        p99_ms=latency.p99 if latency else None,
        throughput=result.throughput,
        why=result.error or result.notes_text,
        ran_on=ran_on(result.environment),
        peak_fraction=found.fraction if (found := distance.distance(result)) else None,
        **_energy(result),
    )


def _energy(result: ConfigurationResult) -> dict:
    energy = result.energy
    if energy is None:
        return {}
    measured = energy.measured
    return {
        "j_per_sample": energy.j_p50 if measured else None,
        "idle_w": energy.idle_w if measured else None,
        "energy_source": energy.source,
    }


def configuration_progress(
    job: JobRow, stored: list[StoredResult] | None = None
) -> tuple[SweepSpec | None, list[ConfigurationProgress]]:
    """The job's sweep and each configuration's state, in the sweep's order, from its `stored`
    results (read here unless the caller, which shows them too, has them); for a serving study
    no sweep, and one row per load point.

    Raises UserError when the stored sweep can no longer be read (an older format) or the job
    is of a kind this version does not know.
    """
    kind = job_kind(job)
    if kind == JobKind.SERVING:
        return None, _serving_progress(job)
    if kind == JobKind.GENERATION:
        return None, _generation_progress(job)
    stored = jobs.stored_results(job.id) if stored is None else stored
    if kind == JobKind.REGRESSION:
        return None, _regression_progress(job, stored)
    try:
        spec = jobs.spec_of(job)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"job {job.id}'s sweep can no longer be read ({exc})") from None
    results = {r.config_key: r.result for r in stored}
    pending = "not run" if job.state.finished else "pending"
    rows = []
    planned = spec.configurations()
    for config in planned:
        result = results.get(config.key)
        if result is None:  # a finished knee search says why it left this batch out
            past = skip_reason(spec, config, stored) if job.state.finished else ""
            rows.append(ConfigurationProgress(config.label, config.key, pending, why=past))
        else:
            rows.append(_from_result(config.label, config.key, result))
    keys = {c.key for c in planned}
    for key, result in results.items():  # added while running: the mixed-precision search steps
        if key not in keys:
            label = result.configuration.label
            rows.append(_from_result(label, key, result))
    return spec, rows


def _regression_progress(job: JobRow, stored: list[StoredResult]) -> list[ConfigurationProgress]:
    """Each model's configurations' two sides (A's environment, then B's), measured or pending;
    the label names the model where the check covers several."""
    from backend.jobs.regressspec import SIDES, RegressionSpec

    spec = RegressionSpec.from_dict(job.spec)
    results = {r.config_key: r.result for r in stored}
    pending = "not run" if job.state.finished else "pending"
    rows = []
    for model in spec.model_ids(job.model_id):
        which = f"model {model} " if spec.keyed_by_model() else ""
        for config in spec.configurations():
            for side in SIDES:
                key = spec.key_of(side, model, config)
                label = f"{which}{side.upper()} {spec.env_of(side)}: {config.label}"
                result = results.get(key)
                rows.append(
                    ConfigurationProgress(label, key, pending)
                    if result is None
                    else _from_result(label, key, result)
                )
    return rows


SATURATED_WHY = (
    "the load generator could not offer this rate, so its latency is the client's, not the "
    "server's (no p50/p99 shown)"
)


def _serving_progress(job: JobRow) -> list[ConfigurationProgress]:
    """One row per planned load point of a serving study, measured or still pending, labelled
    as it ran (a fixed-batch file served without batching says so)."""
    study = ServingStudy.from_dict(job.spec)
    stored = {
        row.point_key: row for row in serving_store.list_points([job.id], kind=serving_store.POINT)
    }
    pending = "not run" if job.state.finished else "pending"
    rows = []
    for variant in study.variants:
        for policy in study.policies:
            for load in study.loads:
                key = point_key(variant, policy, load)
                label = f"{configuration_label(variant, policy)} | {load_label(load)}"
                row = stored.get(key)
                if row is None:
                    rows.append(ConfigurationProgress(label, key, pending))
                    continue
                point = LoadPoint.from_dict(row.payload)
                ran = f"{ran_label(variant, policy, [point])} | {load_label(load)}"
                saturated = point.generator_saturated  # the client's limit, not the server's
                status = "ok" if point.stable else "unstable"
                rows.append(
                    ConfigurationProgress(
                        label=ran,
                        key=key,
                        status="client saturated" if saturated else status,
                        p50_ms=None if saturated else point.latency.p50,
                        p99_ms=None if saturated else point.latency.p99,
                        throughput=point.achieved_rps,
                        why=(SATURATED_WHY + "; " if saturated else "") + point.stability_note,
                    )
                )
    return rows


def _generation_progress(job: JobRow) -> list[ConfigurationProgress]:
    """One row per planned point of a generation job: p50 is the whole generation's, throughput
    its output tokens/s, and the why line its TTFT, ITL and perplexity (or verdict, or error)."""
    from backend.generate.jobspec import GenerationJobSpec
    from backend.generate.points import generation_frame

    frame = generation_frame([job.id]).set_index("key")
    pending = "not run" if job.state.finished else "pending"
    rows = []
    for key in GenerationJobSpec.from_dict(job.spec).point_keys():
        if key not in frame.index:
            rows.append(ConfigurationProgress(key, key, pending))
            continue
        point = frame.loc[key]
        measured = point["ttft_p50_ms"] is not None and point["ttft_p50_ms"] == point["ttft_p50_ms"]
        why = point["verdict"] or point["error"]
        if measured and not why:
            why = f"TTFT p50 {point['ttft_p50_ms']:.2f} ms, ITL p50 {point['itl_p50_ms']:.3f} ms"
            if point["perplexity"] == point["perplexity"] and point["perplexity"] is not None:
                why += f", perplexity {point['perplexity']:.3f}"
        rows.append(
            ConfigurationProgress(
                label=point["label"].split(" · ", 1)[-1],
                key=key,
                status=point["status"],
                p50_ms=point["e2e_p50_ms"] if measured else None,
                throughput=point["output_tokens_per_s"] if measured else None,
                why=why,
            )
        )
    return rows


@lru_cache(maxsize=1024)  # a stored profile never changes (content-addressed): read it once
def _untraced(sha256: str) -> bool:
    try:
        profile = stored_profile({"profile_sha256": sha256})
    except (UserError, OSError, ValueError, KeyError):  # missing or unreadable: nothing to say
        return False
    return profile is not None and bool(untraced_note(profile))


def untraced_profiles(stored: list[StoredResult]) -> str:
    """The Graph page's sentence (profile.untraced_note), said of this job's configurations
    whose profiles were stored before fused kernels were traced; '' when none was."""
    old = [s for s in stored if _untraced(str(s.result.telemetry.get("profile_sha256") or ""))]
    if not old:
        return ""
    labels = ", ".join(s.configuration.label for s in old)
    subject = f"The profile of {labels} was" if len(old) == 1 else f"The profiles of {labels} were"
    return untraced_sentence(subject)
