"""A recommended configuration's Triton model repository as a zip, for the Serve page's
download: the same file `serve recommend --confirm` would serve (confirm.job_files), the
configuration's batching policy, written by the writer `optiboard serve export` uses."""

from __future__ import annotations

from backend.errors import UserError
from backend.launch.folders import owned_folder
from backend.serving.confirm import job_files
from backend.serving.evidence import Evidence
from backend.serving.export import Device, ServingTarget, export_repository
from backend.serving.types import ServingProvider


def repository_zip(job_id: int, evidence: Evidence, model_name: str) -> tuple[str, bytes]:
    """(file name, zip bytes) of the configuration `evidence` ranks, on this host's CPU; a GPU
    configuration is exported from a terminal (`serve export --gpu`, its TensorRT precision)."""
    variant = evidence.candidate.variant
    if variant.provider != ServingProvider.CPU.value:
        raise UserError(
            f"{evidence.candidate.label} serves on {variant.provider}; export it from a "
            f"terminal with `optiboard serve export ... --gpu`."
        )
    files = {(f.precision, f.provider): f for f in job_files(job_id, (ServingProvider.CPU,))}
    served = files.get((variant.precision, variant.provider))
    if served is None:
        raise UserError(f"Job #{job_id} stored no file for {evidence.candidate.label}.")
    target = ServingTarget(model_name, evidence.candidate.policy, Device.CPU)
    with owned_folder("download") as folder:  # gone with this process, even when it is killed
        written = export_repository(target, served.path, folder / f"{model_name}-triton.zip")
        return written.name, written.read_bytes()
