"""Submitting, listing, cancelling and retrying sweeps; job state transitions live in storage.

The checks of a submitted sweep against its model's graph import ONNX inside submit_sweep:
listing, showing and cancelling jobs (every `optiboard jobs`) need none of it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import settings
from backend.auth import caps
from backend.auth.actor import current_actor as actor
from backend.errors import UserError
from backend.graphview.structure import read_structure
from backend.knobs.links import CUSTOM_MEASURE, from_query, to_query  # noqa: F401 (pages read it)
from backend.models.library import get_model, onnx_path
from backend.pricing import or_default
from backend.records import JobKind, get_job, stored_results
from backend.runtimeenvs import DEFAULT, ready_env
from backend.runtimes import RUNTIMES
from backend.specs import SAME_SET, Precision, SweepSpec
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import workers as worker_store
from storage.repo.jobs import EventRow, JobRow
from storage.states import JobState


def submit_sweep(
    model_id: int, spec: SweepSpec, label: str | None = None, held_by: str | None = None
) -> JobRow:
    """Queue one job holding every configuration of the sweep; held_by: created already
    claimed by that worker (the terminal of `optiboard run`, storage.repo.jobs.create_job)."""
    from backend.engine.shapes import check_dim_names, stored_dim_names

    model = get_model(model_id)
    onnx_path(model_id)  # a generative model (a folder of files) in one sentence
    check_dim_names(dict(spec.symbolic_dims), stored_dim_names(model.inputs, model.outputs))
    if spec.fp32_nodes:
        _check_fp32_nodes(model.id, model.name, spec.fp32_nodes)
    unknown = [name for name in spec.runtimes if name not in RUNTIMES]
    if unknown:
        raise UserError(f"Unknown runtime {unknown[0]!r}; choose from {', '.join(RUNTIMES)}.")
    if (spec.targets or spec.replicas > 1) and not settings.RAY_ADDRESS.get():
        raise UserError(
            "Hardware targets and replicas need a Ray cluster; set OPTIBOARD_RAY_ADDRESS "
            "(README: Many machines) or clear them."
        )
    ready_env(spec.runtime_env)  # unknown or not set up: one sentence, nothing stored
    if spec.runtime_env != DEFAULT and (spec.targets or spec.replicas > 1):
        raise UserError(
            "A runtime environment applies to this host's worker only, not to Ray cluster "
            "targets or replicas; clear --env or the targets."
        )
    configurations = spec.configurations()
    _check_fixed_batch(model.inputs, {c.batch_size for c in configurations})
    caps.check_configurations(len(configurations))
    caps.check_queued()
    spec = replace(spec, prices=or_default(spec.prices))  # stored: a link prices it the same
    return job_store.create_job(
        model_id,
        spec.to_dict(),  # no "kind" key: a sweep's spec never had one
        total=len(configurations),
        label=label,
        submitted_by=actor(),
        kind=JobKind.SWEEP.value,
        held_by=held_by,
    )


def list_jobs(
    model_id: int | None = None, states: list[JobState] | None = None, limit: int | None = None
) -> list[JobRow]:
    return job_store.list_jobs(model_id=model_id, states=states, limit=limit)


def job_counts() -> dict[str, int]:
    return job_store.count_jobs_by_state()


def job_events(job_id: int, limit: int = 500) -> list[EventRow]:
    return job_store.list_events(job_id, limit=limit)


def cancel_job(job_id: int) -> JobState:
    get_job(job_id)
    return job_store.cancel_job(job_id)


def cancel_said(job_id: int, state: JobState) -> str:
    """What a cancel did, from the state cancel_job returned: a job that had already succeeded
    or failed (it may have ended as the cancel came) was not cancelled."""
    if state == JobState.RUNNING:
        return f"Job {job_id}: cancel requested; the worker stops it."
    if state == JobState.CANCELLED:
        return f"Job {job_id}: cancelled."
    return f"Job {job_id} had already {state.value}; nothing was cancelled."


def _check_fixed_batch(inputs: list[dict], batch_sizes: set[int]) -> None:
    """Batch sizes an input's fixed first dimension cannot take (the measurement's own rule,
    engine/inputs.runs_at_batch): refused here, not as failed rows of a queued job."""
    from backend.engine.inputs import fixed_batch, runs_at_batch

    for value in inputs:
        shape = value.get("shape") or []
        bad = sorted(b for b in batch_sizes if not runs_at_batch(shape, b))
        if bad:
            first = fixed_batch(shape)
            raise UserError(
                f"Input {value.get('name')!r} has a fixed batch of {first}, so batch size"
                f"{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))} cannot run; pick "
                f"{'1' if first == 1 else f'1 or {first}'}, or export the model with a "
                "dynamic batch axis."
            )


def _check_fp32_nodes(model_id: int, model_name: str, wanted: tuple[str, ...]) -> None:
    """Nodes to keep in FP32 must be the model's, as the Graph page names them (an unnamed node
    is OP_INDEX), or a node ORT's pre-processing fused one into ("dense/MatMulAddFusion", as
    the mixed-precision search finds them): refused here, not as a failed row later.

    A node inside an If/Loop/Scan body (named as Compatibility and profiles name it) is refused
    for what it is: ORT's QDQ quantizer walks the main graph only (QDQQuantizer.quantize_model
    iterates model.graph.node), so a body's nodes stay float in every static INT8 variant and
    there is nothing to keep."""
    structure = read_structure(onnx_path(model_id))
    keys = [node.key for node in structure.nodes]
    known = set(keys)
    missing = [w for w in wanted if w not in known and w.rsplit("/", 1)[0] not in known]
    where = {body.name: body.where for body in structure.bodies}
    unknown = [m for m in missing if m not in where]
    if unknown:
        shown = ", ".join(repr(m) for m in unknown[:5])
        raise UserError(
            f"Node(s) {shown} to keep in FP32 are not in {model_name}'s graph; use the names the "
            f"Graph page shows (for example {', '.join(keys[:3])})."
        )
    if missing:
        shown = ", ".join(f"{m!r} (in {where[m]})" for m in missing[:5])
        raise UserError(
            f"Node(s) {shown} are inside an If/Loop/Scan body, which ONNX Runtime's static INT8 "
            "quantizer leaves unquantized: they run in FP32 in its INT8 variants already, so "
            'there is nothing to keep; leave them out of "keep in FP32".'
        )


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
    then searching the fastest INT8/FP32 mix that meets `bound` (backend.jobs.mixedsearch)."""
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
    """Optimize-page URL parameters holding every knob of the sweep, read from the knobs'
    declarations (backend.knobs.links; see spec_from_query)."""
    return to_query(spec)


def spec_from_query(query: Mapping[str, str]) -> SweepSpec:
    """The sweep a link describes; absent keys take SweepSpec's own defaults.

    The inverse of spec_to_query for every knob, so "Run again with changes" keeps the
    calibration file, its sample count and the measurement (preset or custom) of the stored job.
    """
    try:
        return SweepSpec(**from_query(SweepSpec, query))
    except (ValueError, TypeError) as exc:
        raise UserError(
            f"This link holds a value that is not valid here ({exc}); reopen it."
        ) from None


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
    from backend.models.library import onnx_path, store

    model = onnx_path(model_id)  # its inputs are read in the check's child, not here
    check_npz_in_child(_CHECKERS[kind], Path(npz_path), model, dict(symbolic_dims or {}))
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
