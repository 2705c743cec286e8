"""Submitting, listing, cancelling and retrying sweeps; job state transitions live in storage."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path

import settings
from backend.auth.audit import current_actor as actor
from backend.engine.shapes import check_dim_names, stored_dim_names
from backend.errors import UserError
from backend.models.library import get_model
from backend.queue import caps
from backend.records import get_job
from backend.results import StoredResult
from backend.runtimes import BACKENDS
from backend.specs import (
    DEFAULT_MIN_COSINE,
    MEASURE_PRESETS,
    SAME_SET,
    Configuration,
    CudaOptions,
    IoMode,
    MeasureSettings,
    Precision,
    SweepSpec,
    preset_name,
)
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.repo import workers as worker_store
from storage.repo.jobs import EventRow, JobRow
from storage.states import JobState

CUSTOM_MEASURE = "custom"  # the `measure` query value when the m_* values are given one by one


def submit_sweep(model_id: int, spec: SweepSpec, label: str | None = None) -> JobRow:
    """Queue one job holding every configuration of the sweep."""
    model = get_model(model_id)
    check_dim_names(dict(spec.symbolic_dims), stored_dim_names(model.inputs, model.outputs))
    unknown = [name for name in spec.runtimes if name not in BACKENDS]
    if unknown:
        raise UserError(f"Unknown runtime {unknown[0]!r}; choose from {', '.join(BACKENDS)}.")
    if (spec.targets or spec.replicas > 1) and not settings.RAY_ADDRESS.get():
        raise UserError(
            "Hardware targets and replicas need a Ray cluster; set OPTIBOARD_RAY_ADDRESS "
            "(README: Many machines) or clear them."
        )
    configurations = spec.configurations()
    caps.check_configurations(len(configurations))
    caps.check_queued()
    return job_store.create_job(
        model_id, spec.to_dict(), total=len(configurations), label=label, submitted_by=actor()
    )


def list_jobs(
    model_id: int | None = None, states: list[JobState] | None = None, limit: int | None = None
) -> list[JobRow]:
    return job_store.list_jobs(model_id=model_id, states=states, limit=limit)


def job_counts() -> dict[str, int]:
    return job_store.count_jobs_by_state()


def job_events(job_id: int, limit: int = 500) -> list[EventRow]:
    return job_store.list_events(job_id, limit=limit)


def stored_results(job_id: int) -> list[StoredResult]:
    """The job's results read as types, in the order they were stored."""
    return [StoredResult.from_row(row) for row in result_store.list_results(job_ids=[job_id])]


def fp32_baseline(stored: list[StoredResult], config: Configuration) -> StoredResult | None:
    """The measured FP32 result this configuration is compared with: same runtime, provider
    and batch."""
    return next(
        (
            r
            for r in stored
            if r.ok
            and r.latency is not None
            and r.configuration.precision == Precision.FP32
            and r.configuration.backend == config.backend
            and r.configuration.provider == config.provider
            and r.configuration.batch_size == config.batch_size
            and r.configuration.target == config.target
            and r.configuration.replicas == config.replicas
        ),
        None,
    )


def cancel_job(job_id: int) -> JobState:
    get_job(job_id)
    return job_store.cancel_job(job_id)


def retry_job(job_id: int) -> JobRow:
    """Queue the same sweep again as a new job (the old one and its results stay)."""
    job = get_job(job_id)
    if not job.state.finished:
        raise UserError(f"Job {job_id} is still {job.state.value}; retry it once it has finished.")
    caps.check_queued()
    return job_store.retry_job(job_id, submitted_by=actor())


def resubmit_with_changes(job_id: int, spec: SweepSpec, label: str | None = None) -> JobRow:
    job = get_job(job_id)
    return submit_sweep(job.model_id, spec, label=label or job.label)


def submit_search(job_id: int, bound: str) -> JobRow:
    """A new job measuring FP32 and ONNX Runtime's static INT8 where `job_id` measured INT8,
    then searching the fastest INT8/FP32 mix that meets `bound` (backend.queue.mixedsearch)."""
    job = get_job(job_id)
    int8 = [
        r.configuration
        for r in stored_results(job_id)
        if r.measured  # INT8 with wrong outputs is what a search is for
        and r.configuration.precision == Precision.INT8_STATIC
        and r.configuration.backend == "onnxruntime"
    ]
    if not int8:
        raise UserError(
            f"Job {job_id} has no measured ONNX Runtime static INT8 result to search from; "
            "run a sweep with INT8 static first."
        )
    spec = replace(
        spec_of(job),
        precisions=(Precision.FP32, Precision.INT8_STATIC),
        providers=tuple(dict.fromkeys(c.provider for c in int8)),
        batch_sizes=tuple(dict.fromkeys(c.batch_size for c in int8)),
        backend="onnxruntime",
        backends=(),
        fp32_nodes=(),
        search_bound=bound,
    )
    label = f"mixed-precision search, {bound} (from job {job_id})"
    return submit_sweep(job.model_id, spec, label=label)


def spec_of(job: JobRow) -> SweepSpec:
    return SweepSpec.from_dict(job.spec)


def spec_to_query(spec: SweepSpec) -> dict[str, str]:
    """Optimize-page URL parameters holding every field of the sweep (see spec_from_query)."""
    query = {
        "precisions": ",".join(p.value for p in spec.precisions),
        "backend": spec.backend,
        "hint": spec.performance_hint.value,
        "streams": str(spec.streams),
        "providers": ",".join(spec.providers),
        "batches": ",".join(str(b) for b in spec.batch_sizes),
        "shapes": "fixed" if spec.fixed_shapes else "dynamic",
        "opt": spec.optimization_level,
        "threads": str(spec.intra_op_threads),
        "simplify": "1" if spec.simplify else "0",
        "cal_samples": str(spec.calibration_samples),
        "measure": preset_name(spec.measure) or CUSTOM_MEASURE,
    }
    if spec.backends:
        query["runtimes"] = ",".join(spec.backends)
    if spec.symbolic_dims:
        query["dims"] = ",".join(f"{k}:{v}" for k, v in spec.symbolic_dims)
    if spec.calibration_sha256:
        query["calibration"] = spec.calibration_sha256
    if spec.evaluation_sha256:
        query["evaluation"] = spec.evaluation_sha256
    if spec.search_bound:
        query["search"] = spec.search_bound
    if spec.profile:
        query["profile"] = "1"
    if spec.fp32_nodes:  # one name per line: node names may hold commas
        query["fp32_nodes"] = "\n".join(spec.fp32_nodes)
    if spec.targets:
        query["targets"] = ",".join(spec.targets)
    if spec.replicas > 1:
        query["replicas"] = str(spec.replicas)
    if spec.io_modes != (IoMode.END_TO_END,):
        query["timing"] = ",".join(mode.value for mode in spec.io_modes)
    if spec.cuda != CudaOptions():
        query["cuda"] = json.dumps(spec.cuda.to_dict(), sort_keys=True)
    if not spec.tensorrt.is_default:
        query["trt"] = json.dumps(spec.tensorrt.to_dict(), sort_keys=True)
    if spec.find_knee:
        query["knee"] = str(spec.knee_max_batch)
    if spec.min_cosine != DEFAULT_MIN_COSINE:
        query["min_cosine"] = str(spec.min_cosine)
    if query["measure"] == CUSTOM_MEASURE:
        for f in fields(MeasureSettings):
            query[f"m_{f.name}"] = str(getattr(spec.measure, f.name))
    return query


def _csv(query: Mapping[str, str], key: str) -> list[str]:
    return [part for part in str(query.get(key) or "").split(",") if part]


def _measure_from_query(query: Mapping[str, str]) -> MeasureSettings:
    name = query.get("measure") or "standard"
    if name in MEASURE_PRESETS:
        return MEASURE_PRESETS[name]
    if name != CUSTOM_MEASURE:
        choices = ", ".join([*MEASURE_PRESETS, CUSTOM_MEASURE])
        raise UserError(f"Unknown measurement {name!r} in the link; use one of {choices}.")
    values = {}
    for f in fields(MeasureSettings):
        if (text := query.get(f"m_{f.name}")) is not None:
            kind = int if f.type == "int" else float
            values[f.name] = kind(text)
    return MeasureSettings(**values)


def spec_from_query(query: Mapping[str, str]) -> SweepSpec:
    """The sweep a link describes; absent keys take SweepSpec's own defaults.

    The inverse of spec_to_query for every field, so "Run again with changes" keeps the
    calibration file, its sample count and the measurement (preset or custom) of the stored job.
    """
    values: dict[str, object] = {}
    try:
        if precisions := _csv(query, "precisions"):
            values["precisions"] = tuple(precisions)
        if providers := _csv(query, "providers"):
            values["providers"] = tuple(providers)
        if batches := _csv(query, "batches"):
            values["batch_sizes"] = tuple(int(b) for b in batches)
        if backend := query.get("backend"):
            values["backend"] = backend
        if runtimes := _csv(query, "runtimes"):
            values["backends"] = tuple(runtimes)
        if hint := query.get("hint"):
            values["performance_hint"] = hint
        if streams := query.get("streams"):
            values["streams"] = int(streams)
        if shapes := query.get("shapes"):
            values["fixed_shapes"] = shapes != "dynamic"
        dims = [part.split(":", 1) for part in _csv(query, "dims") if ":" in part]
        values["symbolic_dims"] = tuple((name, int(value)) for name, value in dims)
        if level := query.get("opt"):
            values["optimization_level"] = level
        if threads := query.get("threads"):
            values["intra_op_threads"] = int(threads)
        values["simplify"] = query.get("simplify") == "1"
        values["calibration_sha256"] = query.get("calibration") or None
        values["evaluation_sha256"] = query.get("evaluation") or None
        values["search_bound"] = query.get("search") or ""
        if samples := query.get("cal_samples"):
            values["calibration_samples"] = int(samples)
        values["measure"] = _measure_from_query(query)
        values["profile"] = query.get("profile") == "1"
        values["targets"] = tuple(_csv(query, "targets"))
        if replicas := query.get("replicas"):
            values["replicas"] = int(replicas)
        if timing := _csv(query, "timing"):
            values["io_modes"] = tuple(IoMode(mode) for mode in timing)
        if cuda := query.get("cuda"):
            values["cuda"] = _cuda_from_query(cuda)
        if trt := query.get("trt"):
            values["tensorrt"] = json.loads(trt)  # checked by TrtOptions, refusals included
        if knee := query.get("knee"):
            values["find_knee"], values["knee_max_batch"] = True, int(knee)
        if min_cosine := query.get("min_cosine"):
            values["min_cosine"] = float(min_cosine)
        values["fp32_nodes"] = tuple(n for n in str(query.get("fp32_nodes") or "").split("\n") if n)
        return SweepSpec(**values)  # type: ignore[arg-type]
    except (ValueError, TypeError) as exc:
        raise UserError(
            f"This link holds a value that is not valid here ({exc}); reopen it."
        ) from None


def _cuda_from_query(text: str) -> CudaOptions:
    """CUDA options from a link's JSON; anything but known names with values of the right
    kind is a ValueError that names it (a hand-edited link must not reach the constructor)."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("the CUDA options are not a set of named values")
    defaults = CudaOptions().to_dict()
    for name, given in value.items():
        if name not in defaults:
            raise ValueError(f"unknown CUDA option {str(name)[:40]!r}")
        if type(given) is not type(defaults[name]):
            raise ValueError(f"CUDA option {name!r} has a value of the wrong kind")
    return CudaOptions.from_value(value)


def list_workers(alive_within_seconds: float | None = 30.0) -> list[worker_store.WorkerRow]:
    return worker_store.list_workers(alive_within_seconds=alive_within_seconds)


def store_calibration(
    model_id: int,
    npz_path: Path,
    filename: str = "calibration.npz",
    symbolic_dims: dict[str, int] | None = None,
) -> str:
    """Check a calibration .npz against the model's inputs, store it, and return its sha256."""
    return _store_checked_npz(model_id, npz_path, filename, symbolic_dims, "calibration")


def store_evaluation(
    model_id: int,
    npz_path: Path,
    filename: str = "evaluation.npz",
    symbolic_dims: dict[str, int] | None = None,
    calibration_sha256: str | None = None,
) -> str:
    """Check an evaluation .npz (inputs, optional labels), store it, and return its sha256.

    The calibration file of the same sweep is refused here, before anything is stored.
    """
    if calibration_sha256 and _sha256_of(Path(npz_path)) == calibration_sha256:
        raise UserError(SAME_SET)
    return _store_checked_npz(model_id, npz_path, filename, symbolic_dims, "evaluation")


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


_CHECKERS = {
    "calibration": "backend.engine.calibration:child_check_calibration",
    "evaluation": "backend.engine.evaluation:child_check_evaluation",
}


def _store_checked_npz(
    model_id: int, npz_path: Path, filename: str, symbolic_dims: dict[str, int] | None, kind: str
) -> str:
    """Check the .npz in a limited child (the upload is untrusted and this may be the web
    process), then store it as an artifact of `kind`; a refused file stores nothing."""
    from backend.engine.calibration import check_npz_in_child
    from backend.engine.inputs import input_specs_of
    from backend.models.library import onnx_path, store

    specs = input_specs_of(onnx_path(model_id))
    check_npz_in_child(_CHECKERS[kind], Path(npz_path), specs, dict(symbolic_dims or {}))
    artifacts = store()
    # the lock is held until the link commits; if it does not, `putting` takes the blob back
    with artifacts.putting([Path(npz_path)]) as (stored,):
        link = model_store.NewArtifact(kind, stored.sha256, stored.size_bytes, filename)
        try:
            model_store.add_artifact(model_id, link)
        except LookupError:
            raise UserError(
                f"The model was deleted while its {kind} file was being stored; "
                "upload the model again and then the file."
            ) from None
    return stored.sha256


def npz_filename(model_id: int, sha256: str | None, kind: str) -> str | None:
    """The name a calibration or evaluation file was uploaded under, for pages to show."""
    if not sha256:
        return None
    names = [
        a.filename
        for a in model_store.list_artifacts(model_id)
        if a.kind == kind and a.sha256 == sha256
    ]
    return names[-1] if names else None
