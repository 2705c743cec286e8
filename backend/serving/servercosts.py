"""Server costs a finished serving study already measured, reused by a sweep's prediction.

A sweep times each file in process: no Triton frontend, no backend hop, no load generator, so a
prediction from it alone is far too high for a small model on a shared host. A serving study of
the same model measured those costs on the real server (serving.costmodel, one cost row per
variant). Its curve replaces the sweep's for a series only where it measured the same thing: the
same file (the series' optimized file, or the upload for FP32, as `serve recommend --confirm`
serves them), on the same execution provider, on the same host (the study's worker's host name
and hardware against the sweep's), by one attempt (a resumed study may have measured its costs
on another worker). No cost model is added: the stored curve is the one the study's own
predictions and `--confirm` simulate from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from backend.records import JobRow, is_serving
from backend.reporting.provenance import hardware
from backend.results import StoredResult
from backend.serving.study import ServingStudy, StudyPoints, cost_key, study_points
from backend.serving.types import LatencyCurve
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.repo import workers as worker_store
from storage.states import JobState


@dataclass(frozen=True)
class StudyCosts:
    """One variant's costs as a finished study measured them on the server."""

    job_id: int
    host: str
    hardware: str
    measured_at: datetime | None
    curve: LatencyCurve

    @property
    def words(self) -> str:
        """'server costs measured by study 7 on HOST at 2026-12-05 14:03 UTC'."""
        when = f" at {self.measured_at:%Y-%m-%d %H:%M} UTC" if self.measured_at else ""
        return f"server costs measured by study {self.job_id} on {self.host}{when}"


# (file sha256, provider, host, hardware) -> the newest study's costs for that file there
Measured = dict[tuple[str, str, str, str], StudyCosts]


def measured_costs(model_id: int) -> Measured:
    """Every cost row of the model's finished studies, newest study first kept, by file, provider
    and the host that measured it; a study whose host is unknown is left out."""
    studies = [
        job
        for job in job_store.list_jobs(model_id=model_id, states=[JobState.SUCCEEDED])
        if is_serving(job) and job.attempts == 1
    ]
    upload = _upload(model_id) if studies else None
    if upload is None:
        return {}
    workers = {w.id: w for w in worker_store.list_workers()}  # several studies: one query
    found: Measured = {}
    for job in studies:
        worker = workers.get(job.worker_id or "")
        if worker is None:
            continue
        study = ServingStudy.from_dict(job.spec)
        provider = study.provider.value
        costs = study_points(job.id).costs
        for variant in study.variants:
            curve = costs.get(cost_key(variant))
            if curve is None:
                continue
            where = (
                variant.sha256 or upload,
                provider,
                worker.hostname,
                hardware(worker.hardware, provider),
            )
            found.setdefault(
                where, StudyCosts(job.id, worker.hostname, where[3], job.finished_at, curve)
            )
    return found


def _upload(model_id: int) -> str | None:
    """The sha256 of the model's own ONNX file (a study's "original"); None: it has none."""
    try:
        return model_store.model_file(model_id).sha256
    except LookupError:
        return None


def series_files(job_id: int, frame: pd.DataFrame, upload: str) -> dict[str, set[str]]:
    """Per sweep series, the files Triton would serve for it: each optimized file its results
    stored, and the upload for FP32 (confirm.job_files serves the same)."""
    series_of = dict(zip(frame["config_key"], frame["series"], strict=True))
    files: dict[str, set[str]] = {}
    for row in result_store.list_results(job_ids=[job_id]):
        item = StoredResult.from_row(row)
        series = series_of.get(item.config_key)
        if series is None:
            continue
        shas = files.setdefault(series, set())
        if item.result.optimized_sha256:
            shas.add(item.result.optimized_sha256)
        if item.configuration.precision.value == "fp32":
            shas.add(upload)
    return files


def costs_for(rows: pd.DataFrame, files: set[str], measured: Measured) -> StudyCosts | None:
    """The study costs one sweep series can use: same file, provider and host (None: none)."""
    first = rows.iloc[0]
    if str(first.get("backend") or "onnxruntime") != "onnxruntime" or first.get("target"):
        return None  # Triton's Python backend runs ONNX Runtime on this host only
    provider, host = str(first["provider"]), str(first.get("ran_on") or "")
    kit = str(first.get("hardware") or "")
    matches = [measured.get((sha, provider, host, kit)) for sha in sorted(files)]
    return max((m for m in matches if m), key=lambda m: m.job_id, default=None)


def series_costs(job_id: int, frame: pd.DataFrame) -> dict[str, StudyCosts]:
    """Per sweep series of the job (its results frame), the study costs it can use."""
    ok = frame[(frame["status"] == "ok") & frame["p50_ms"].notna()]
    if ok.empty or pd.isna(ok["model_id"].iloc[0]):
        return {}
    model_id = int(ok["model_id"].iloc[0])
    measured = measured_costs(model_id)
    if not measured:
        return {}
    files = series_files(job_id, ok, _upload(model_id) or "")
    found = {
        str(series): costs_for(rows, files.get(str(series), set()), measured)
        for series, rows in ok.groupby("series", sort=True)
    }
    return {series: costs for series, costs in found.items() if costs is not None}


def remedy(job_id: int, slo_p99_ms: float, frame: pd.DataFrame | None = None) -> str:
    """The one action that measures what a sweep alone cannot, in words a user can follow;
    where a finished study of the same model exists whose costs do not apply (another host, a
    resumed attempt...), it comes first with the rate it measured and why it is not used: the
    sweep alone once predicted 40,470 req/s beside a study that served 1,643."""
    action = (
        "run a serving study of this model (Serve page, Measured on Triton: "
        "/serve?view=measured), or `optiboard serve recommend "
        f"{job_id} --slo {slo_p99_ms:g} --confirm 3`."
    )
    study = _newest_study(frame) if frame is not None else None
    if study is None:
        return f"To count them, {action}"
    job, stored, why = study
    served = [p for p in stored.points if not p.generator_saturated]
    measured = (
        f"measured up to {max(p.achieved_rps for p in served):,.0f} req/s on Triton"
        if served
        else "measured no point the load generator kept up with"
    )
    return (
        f"Study {job.id} of this model {measured} (`optiboard show {job.id}`, "
        f"/serve?study={job.id}), but its server costs do not apply here: {why}. To count them "
        f"for this sweep, {action}"
    )


def _newest_study(frame: pd.DataFrame) -> tuple[JobRow, StudyPoints, str] | None:
    """The newest finished serving study of the sweep's model, its stored points (read once),
    and why its costs were not reused for it (servercosts reuses only the same file and
    provider on the same host)."""
    ok = frame[(frame["status"] == "ok") & frame["p50_ms"].notna()]
    if ok.empty or pd.isna(ok["model_id"].iloc[0]):
        return None
    studies = [
        job
        for job in job_store.list_jobs(
            model_id=int(ok["model_id"].iloc[0]), states=[JobState.SUCCEEDED]
        )
        if is_serving(job)
    ]
    if not studies:
        return None
    job = max(studies, key=lambda j: j.id)
    stored = study_points(job.id)
    worker = worker_store.get_worker(job.worker_id) if job.worker_id else None
    host = str(ok["ran_on"].iloc[0] or "") if "ran_on" in ok else ""
    if job.attempts != 1:
        why = "it was resumed by a second attempt, so its costs may come from another worker"
    elif not stored.costs:
        why = "it measured no server costs"
    elif worker is None:
        why = "the worker that ran it is no longer known"
    elif worker.hostname != host:
        why = f"it ran on {worker.hostname}, this sweep on {host or 'an unrecorded host'}"
    else:
        why = "it served another file, provider or hardware than this sweep's"
    return job, stored, why
