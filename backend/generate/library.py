"""Generative models in the library: which models are, their GenAI config, and their folder.

The folder is rebuilt from the artifact store as hard links (no copy of multi-GB weights; not
symbolic links, which ONNX Runtime resolves and then refuses as external data outside the model's
directory) under the data directory, once per model; a copy where the store is on another file
system. backend/models/derived.py names it, so deleting the model removes the folder. Treat it
as read-only: the links share the blobs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from backend.errors import UserError
from backend.models import derived, library
from backend.models.genai import GENAI_CONFIG, GENAI_KIND, is_generative_format
from storage.repo.models import ArtifactRow, ModelRow


def _same_file(path: Path, blob: Path) -> bool:
    try:
        return path.stat().st_size == blob.stat().st_size and (
            os.path.samefile(path, blob) or path.stat().st_mtime >= blob.stat().st_mtime
        )
    except OSError:
        return False


def is_generative(model: ModelRow) -> bool:
    return is_generative_format(model.format)


def generative_model(model_id: int) -> ModelRow:
    """The model, or UserError when it is not a generative (GenAI folder) model."""
    model = library.get_model(model_id)
    if not is_generative(model):
        raise UserError(
            f"Model {model.name} is a single-pass ONNX model, not a generative one; upload an "
            "ONNX Runtime GenAI folder or a Hugging Face folder as a .zip."
        )
    return model


def folder_artifacts(model_id: int) -> list[ArtifactRow]:
    return [a for a in library.list_artifacts(model_id) if a.kind == GENAI_KIND]


def genai_config(model_id: int) -> dict[str, Any]:
    generative_model(model_id)
    for artifact in folder_artifacts(model_id):
        if "genai_config" in artifact.meta:
            return artifact.meta["genai_config"]
    raise UserError(f"Model {model_id} has no genai_config.json stored; upload it again.")


def genai_folder(model_id: int) -> Path:
    """The model's GenAI folder (links into the artifact store), made on first use."""
    model = generative_model(model_id)
    target = derived.genai_path(model)
    artifacts = folder_artifacts(model_id)
    links = {path: library.artifact_path(a.sha256) for a in artifacts for path in a.meta["paths"]}
    if all(_same_file(target / p, blob) for p, blob in links.items()):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="linking-", dir=target.parent))
    try:
        for relative, blob in links.items():
            link = staging / relative
            link.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(blob, link)
            except OSError:  # another file system: a copy
                shutil.copyfile(blob, link)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not (target / GENAI_CONFIG).exists():
        raise UserError(f"Model {model.name} has no genai_config.json stored; upload it again.")
    return target
