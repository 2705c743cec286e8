"""Confirmation on the real Triton server: each variant's cost curve measured there, and a
recommendation's best few configurations measured there (recommend.py's `confirm`).

The load generator shares the host with the server: when it cannot offer a confirming rate (a
measurement of the client, not of the server), lower rates are tried on the same server
(GENERATOR_STEPS), and the point's spec says which rate was really measured. recommend.py then
compares two measured rates only when both came from the same step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from backend.errors import UserError
from backend.runtimeenvs import DEFAULT
from backend.serving.recommend import Confirm, MeasuredVariant, Trial
from backend.serving.types import LoadPoint, ServingProvider

GENERATOR_STEPS = (1.0, 0.6, 0.36, 0.2)  # fractions of a confirming rate to fall back to
CURVE_SIZES = (1, 4, 16)  # measured through the server; the simulation interpolates between


def triton_confirm(
    dims: dict[str, int] | None = None,
    intra_op_threads: int | None = None,
    runtime_env: str = DEFAULT,
) -> Confirm:
    """A `confirm` that measures the trial on the real Triton server: the server is started
    with the trial's policy and the Server load is run; when the load generator cannot offer
    that rate (a measurement of the client, not of the server), lower rates are tried on the
    same server (GENERATOR_STEPS), and the point says which rate was really measured."""

    def measure(trial: Trial) -> LoadPoint:
        from backend.serving.loadgen import run_load_in_child  # the server side, when installed
        from backend.serving.server import serve

        path = trial.candidate.variant.model_path
        if not path:
            raise UserError("This variant has no model file to serve; confirm needs one.")
        policy, load = trial.candidate.policy, trial.load
        provider = ServingProvider(trial.candidate.variant.provider)
        with serve(
            Path(path),
            policy,
            dims=dims,
            intra_op_threads=intra_op_threads,
            provider=provider,
            runtime_env=runtime_env,
        ) as server:
            for step in GENERATOR_STEPS:
                rate = (load.target_rps or 0.0) * step
                spec = replace(load, target_rps=rate) if load.target_rps else load
                point = run_load_in_child(server.endpoint, spec)
                if not point.generator_saturated or not load.target_rps:
                    break
        return point

    return measure


@dataclass(frozen=True)
class ServedFile:
    """A variant to serve: its precision and provider, and the ONNX file the server loads."""

    precision: str
    provider: str
    path: Path
    batchable: bool = True  # False: its batch size is fixed, Triton cannot stack requests


def served_variants(
    files: list[ServedFile],
    batch_sizes: tuple[int, ...] = CURVE_SIZES,
    *,
    dims: dict[str, int] | None = None,
    intra_op_threads: int | None = None,
    two_instances: bool = True,
    delay_probe_us: int = 0,
    runtime_env: str = DEFAULT,
) -> list[MeasuredVariant]:
    """Each file's curve and per-request costs measured through the real server
    (serving.costmodel), so the predictions are of that server, not of an in-process sweep.
    delay_probe_us > 0 also measures how late a held batch leaves (for policies with a delay)."""
    from backend.serving.costmodel import measure_costs_on_server  # the server side, when installed

    return [
        MeasuredVariant(
            f.precision,
            f.provider,
            measure_costs_on_server(
                f.path,
                batch_sizes if f.batchable else (1,),  # a fixed-batch server takes one shape
                requests_per_size=10,
                dims=dims,
                intra_op_threads=intra_op_threads,
                two_instances=two_instances,
                delay_probe_us=delay_probe_us,
                provider=ServingProvider(f.provider),
                runtime_env=runtime_env,
            ).curve,
            str(f.path),
            batchable=f.batchable,
        )
        for f in files
    ]


def job_files(
    job_id: int, providers: tuple[ServingProvider, ...] = (ServingProvider.CPU,)
) -> list[ServedFile]:
    """One file per precision and provider of a finished sweep that Triton's ONNX Runtime can
    serve on those providers: the optimized file the sweep stored, or the model's own for FP32;
    one that can batch first (a fixed-shape sweep's files have the batch size baked in, and
    Triton serves those without dynamic batching), so FP32 falls back on the upload."""
    from backend.models import library
    from backend.records import get_job
    from backend.results import StoredResult
    from backend.serving.repository import can_batch
    from storage.repo import results as result_store

    job = get_job(job_id)
    stored = [StoredResult.from_row(row) for row in result_store.list_results(job_ids=[job_id])]
    wanted = {p.value for p in providers}
    found: dict[tuple[str, str], list[Path]] = {}
    for item in stored:
        precision, provider = item.configuration.precision.value, item.configuration.provider
        if provider not in wanted:
            continue
        paths = found.setdefault((precision, provider), [])
        if item.result.optimized_sha256:
            paths.append(library.artifact_path(item.result.optimized_sha256))
        if precision == "fp32":
            paths.append(library.onnx_path(job.model_id))
    files: dict[tuple[str, str], ServedFile] = {}
    for (precision, provider), paths in found.items():
        batching = [path for path in dict.fromkeys(paths) if can_batch(path)]
        if paths:
            path = (batching or paths)[0]
            files[precision, provider] = ServedFile(precision, provider, path, bool(batching))
    if not files:
        names = " or ".join(p.value.upper() for p in providers)
        raise UserError(
            f"Job #{job_id} has no {names} variant with a model file to serve; "
            f"run a sweep on {names} first."
        )
    return list(files.values())
