"""Where a library model came from, in words, for the Models page and the CLI alike: uploaded,
a second copy of an upload, or a variant made from another model (by a job, with settings).

The row says which model and which job (models.origin and its two source ids, 0014; each set
to NULL when that model or job is deleted); the settings come from the variant's own artifact
meta, written when it was made (backend/generate/variants.py), so they survive its source.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.models import library
from storage.repo import models as model_store
from storage.repo.models import ModelRow
from storage.states import ModelOrigin

SOURCE_DELETED = "source model deleted"


def settings_text(variant: Mapping[str, Any]) -> str:
    """A variant's settings as stored in its meta: "INT4 RTN block 32 symmetric"; "" if none."""
    if variant.get("kind") == "weight-only":
        words = [
            f"INT{variant.get('bits')} {str(variant.get('algorithm', '')).upper()}",
            f"block {variant.get('block_size')}",
            "symmetric" if variant.get("symmetric") else "asymmetric",
        ]
        if variant.get("accuracy_level") is not None:
            words.append(f"accuracy level {variant['accuracy_level']}")
        if variant.get("algorithm") == "gptq":
            words.append(f"calibrated on {variant.get('calibration_text')}")
        return " ".join(words)
    if variant.get("kind") == "builder":
        block = f" block {variant['block_size']}" if variant.get("block_size") else ""
        return f"rebuilt by the model builder in {variant.get('precision')}{block}"
    return ""


def _variant_meta(model_id: int) -> Mapping[str, Any]:
    """The meta of the artifact that says what the variant is (variant_of, variant), or {}."""
    for artifact in library.list_artifacts(model_id):
        if isinstance(artifact.meta, dict) and "variant" in artifact.meta:
            return artifact.meta
    return {}


def _named(model_id: int) -> str:
    source = model_store.get_model(model_id)
    return f"model #{model_id} ({source.name})" if source else f"model #{model_id}"


def origin_sentence(model: ModelRow) -> str | None:
    """One sentence on what the model was made from and by which job; None for an upload."""
    if model.origin == ModelOrigin.COPY.value:
        if model.source_model_id is None:
            return f"A second copy of an upload; {SOURCE_DELETED}."
        return (
            f"A second copy of {_named(model.source_model_id)}: the same file (sha256 "
            f"{model.sha256[:12]}), added again on request."
        )
    if model.origin != ModelOrigin.VARIANT.value:
        return None
    meta = _variant_meta(model.id)
    settings = settings_text(meta.get("variant") or {})
    made_with = f", {settings}" if settings else ""
    if model.source_model_id is None:
        was = f" #{meta['variant_of']}" if isinstance(meta.get("variant_of"), int) else ""
        return f"Made from model{was}{made_with}; {SOURCE_DELETED}, with the job that made it."
    source = _named(model.source_model_id)
    if model.source_job_id is None:
        return f"Made from {source}{made_with}; no job is recorded as making it."
    return f"Made by job #{model.source_job_id} from {source}{made_with}."


def origin_short(model: ModelRow) -> str:
    """The origin in a few words, for a listing: "upload", "copy of #3", "job #7 from #3"."""
    source = model.source_model_id
    if model.origin == ModelOrigin.COPY.value:
        return f"copy of #{source}" if source is not None else f"copy; {SOURCE_DELETED}"
    if model.origin != ModelOrigin.VARIANT.value:
        return "upload"
    if source is None:
        return f"variant; {SOURCE_DELETED}"
    job = model.source_job_id
    return f"job #{job} from #{source}" if job is not None else f"variant of #{source}"


def kept_on_delete(model: ModelRow) -> str | None:
    """What deleting `model` leaves of the models made from it, in one sentence; None if none."""
    made = library.made_from(model.id)
    if not made:
        return None
    ids = ", ".join(f"#{m.id} {m.name}" for m in made)
    return (
        f"The models made from it ({ids}) stay in the library, marked "
        f'"{SOURCE_DELETED}"; delete them on their own if you no longer want them.'
    )
