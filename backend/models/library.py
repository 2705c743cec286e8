"""The model library as pages and the CLI see it: reads, downloads and deletes over storage."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from backend.errors import UserError
from backend.launch.folders import owned_folder
from backend.models import derived
from storage.artifacts import ArtifactStore
from storage.repo import models as model_store
from storage.repo.models import ArtifactRow, ModelRow


def store() -> ArtifactStore:
    return ArtifactStore()


def list_models() -> list[ModelRow]:
    return model_store.list_models()


def get_model(model_id: int) -> ModelRow:
    model = model_store.get_model(model_id)
    if model is None:
        raise UserError(f"There is no model {model_id}; pick one from the model library.")
    return model


def made_from(model_id: int) -> list[ModelRow]:
    """The library models made from this one (variants, copies), oldest first."""
    return model_store.made_from(model_id)


def list_artifacts(model_id: int) -> list[ArtifactRow]:
    return model_store.list_artifacts(model_id)


def artifact_path(sha256: str) -> Path:
    path = store().path_for(sha256)
    if not path.is_file():
        raise UserError(f"Artifact {sha256[:12]} is missing from the store; re-upload the model.")
    return path


def onnx_path(model_id: int) -> Path:
    """The ONNX file to optimize and inspect (converted for SavedModels, else the upload)."""
    model = get_model(model_id)
    try:
        return artifact_path(model_store.model_file(model_id).sha256)
    except LookupError:
        raise UserError(
            f"Model {model.name} ({model.format}) is a folder of files, not one ONNX file; use "
            "it with the generation benchmark."
        ) from None


def ingest_upload(
    chunks: Iterable[bytes],
    filename: str,
    name: str | None = None,
    on_saved: Callable[[int], None] | None = None,
    copy: bool = False,
) -> ModelRow:
    """Write an upload (as it streams in) to a private temp folder, then ingest it.

    on_saved(bytes written so far) is called after each chunk, for a progress bar; the temp
    folder is removed whatever happens, and ingest stores nothing on a rejection (the same
    file as a library model too, unless `copy`).
    """
    from backend.models.ingest import ingest_file  # heavy (onnx, tf2onnx): only when uploading

    with owned_folder("upload") as tmp:  # swept if the dashboard is SIGKILLed mid-upload
        path = tmp / Path(filename).name
        written = 0
        with open(path, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
                written += len(chunk)
                if on_saved is not None:
                    on_saved(written)
        return ingest_file(path, filename, name=name or None, copy=copy)


def symbolic_dims(model: ModelRow) -> list[str]:
    """Names of the inputs' symbolic dimensions past the first (the first is the batch size).

    These are the dims a sweep must be given values for; sorted, so a form lists them stably.
    """
    return sorted(
        {
            str(dim)
            for value in model.inputs
            for dim in (value.get("shape") or [])[1:]
            if isinstance(dim, str) and dim
        }
    )


def delete_model(model_id: int) -> None:
    """Delete the model, its blobs nobody else uses (with their weightless viewer copies), and a
    generative model's linked folder."""
    model = get_model(model_id)
    digests = {a.sha256 for a in list_artifacts(model_id)}
    try:
        model_store.delete_model(model_id, store=store())
    except model_store.ModelInUse:
        raise UserError(
            f"Model {model.name} has a running job; cancel it on the Jobs page (or let it "
            "finish) before deleting the model."
        ) from None
    except LookupError:
        raise UserError(f"There is no model {model_id}; pick one from the model library.") from None
    derived.remove(model_id, gone=[d for d in digests if not store().exists(d)])


def export_check(artifacts: list[ArtifactRow]) -> list[str]:
    """How a PyTorch upload's ONNX compares with its ExportedProgram (stored at conversion), and
    its dynamic dimensions; [] for every other upload."""
    meta = next((a.meta for a in artifacts if a.kind == "converted" and a.meta.get("check")), None)
    if meta is None:
        return []
    check = meta["check"]
    shapes = "; ".join(
        ", ".join(f"{name} {shape}" for name, shape in run["shapes"].items())
        for run in check.get("runs", [])
    )
    versions = meta.get("versions", {})
    lines = [
        f"Checked against the ExportedProgram with ONNX Runtime on seeded inputs (seed "
        f"{check.get('seed')}): max abs diff {check.get('max_abs_diff'):.3g}, cosine "
        f"{check.get('cosine'):.6f}, shapes {shapes} (torch {versions.get('torch', '?')}, "
        f"opset {meta.get('opset')})."
    ]
    dims = meta.get("dims") or []
    if dims:
        lines.append(
            "Dynamic dimensions: "
            + ", ".join(
                f"{d['name']} ({d['min']}..{d['max'] if d['max'] is not None else '∞'})"
                for d in dims
            )
            + "."
        )
    return lines


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
