"""The model library as pages and the CLI see it: reads, downloads and deletes over storage."""

from __future__ import annotations

from pathlib import Path

from backend.errors import UserError
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


def list_artifacts(model_id: int) -> list[ArtifactRow]:
    return model_store.list_artifacts(model_id)


def artifact_path(sha256: str) -> Path:
    path = store().path_for(sha256)
    if not path.is_file():
        raise UserError(f"Artifact {sha256[:12]} is missing from the store; re-upload the model.")
    return path


def onnx_path(model_id: int) -> Path:
    """The ONNX file to optimize and inspect (converted for SavedModels, else the upload)."""
    get_model(model_id)
    return artifact_path(model_store.model_file(model_id).sha256)


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
    model = get_model(model_id)
    try:
        model_store.delete_model(model_id, store=store())
    except model_store.ModelInUse:
        raise UserError(
            f"Model {model.name} has a running job; cancel it on the Jobs page (or let it "
            "finish) before deleting the model."
        ) from None
    except LookupError:
        raise UserError(f"There is no model {model_id}; pick one from the model library.") from None
