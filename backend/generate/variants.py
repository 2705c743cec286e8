"""Variants of a library generative model: weight-only quantized copies stored as library models
of their own, rebuilt precisions from the uploaded Hugging Face folder, and OpenVINO folders.

A quantized variant is a new model (format `genai`) whose genai_config artifact names the model
and settings it came from (meta["variant_of"], meta["variant"]) and what its graph holds
(meta["facts"]), so every later number can say what ran. OpenVINO folders are not ONNX models;
they are kept, per model and settings, next to the model's linked GenAI folder and removed with it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from backend.errors import UserError
from backend.generate import library as generative
from backend.generate.ovexport import (
    IrFacts,
    NncfConfig,
    OpenVinoFolder,
    compress_openvino,
    export_openvino,
)
from backend.generate.weightonly import WeightOnlyConfig, WeightOnlyVariant, quantize_folder
from backend.launch.folders import owned_folder
from backend.models import derived, library
from backend.models.genai import FORMAT_GENAI, FORMAT_HF, plan_genai_folder
from backend.models.hfconvert import BuilderOptions, build_genai_folder
from backend.models.safezip import extracted
from storage.repo import models as model_store
from storage.repo.models import ModelRow, NewArtifact, Provenance
from storage.states import ModelOrigin

FACTS_FILE = "optiboard_facts.json"  # what the export's IR holds and the versions that ran


def _work() -> AbstractContextManager[Path]:
    """A work folder beside the store, swept if the worker is SIGKILLed (it holds model copies)."""
    return owned_folder("variant", under=library.store().root.parent / "tmp")


def quantize_model(
    model_id: int, config: WeightOnlyConfig, name: str | None = None, job_id: int | None = None
) -> ModelRow:
    """A weight-only quantized copy of a generative model, stored as a new library model that
    names its source and the job that made it (`job_id`; None when no job did)."""
    source = generative.generative_model(model_id)
    with _work() as work:
        variant = quantize_folder(generative.genai_folder(model_id), work / "q", config)
        return store_folder(
            variant.folder,
            name or f"{source.name} ({config.label})",
            variant_meta(source, "weight-only", config.to_dict(), variant),
            Provenance(ModelOrigin.VARIANT, source.id, job_id),
        )


def rebuild_model(model_id: int, options: BuilderOptions, name: str | None = None) -> ModelRow:
    """The model builder run again on an uploaded HF folder with other options (FP16, INT4...)."""
    source = generative.generative_model(model_id)
    with _work() as work:
        with hf_source(source, work) as hf_folder:
            built = build_genai_folder(hf_folder, work / "built", options, shown=source.name)
        meta = {
            "variant_of": source.id,
            "variant": {"kind": "builder", **options.to_dict()},
            "versions": built.versions,
        }
        label = options.precision + (f" b{options.block_size}" if options.block_size else "")
        made = Provenance(ModelOrigin.VARIANT, source.id)
        return store_folder(built.folder, name or f"{source.name} ({label})", meta, made)


def openvino_folder(model_id: int, compression: NncfConfig | None = None) -> OpenVinoFolder:
    """The model as an OpenVINO GenAI folder (exported once), optionally NNCF-compressed."""
    source = generative.generative_model(model_id)
    fp32 = derived.genai_path(source, "-openvino-fp32")
    facts_file = fp32 / FACTS_FILE
    if not facts_file.is_file():
        with _work() as work:
            with hf_source(source, work) as hf_folder:
                exported = export_openvino(hf_folder, work / "ov")
            (exported.folder / FACTS_FILE).write_text(json.dumps(exported.to_dict()))
            shutil.rmtree(fp32, ignore_errors=True)
            shutil.move(exported.folder, fp32)
    if compression is None:
        saved = json.loads(facts_file.read_text())
        return OpenVinoFolder(fp32, IrFacts(**saved["facts"]), saved["versions"])
    tag = compression.label.replace(" ", "-")
    target = fp32.parent / fp32.name.replace("openvino-fp32", f"openvino-{tag}")
    shutil.rmtree(target, ignore_errors=True)
    return compress_openvino(fp32, target, compression)


def hf_folder(model_id: int) -> Path:
    """The uploaded Hugging Face folder of an `hf-genai` model, unzipped once (safezip) next to
    its GenAI folder and kept (read-only use): what the torch runtime opens."""
    source = generative.generative_model(model_id)
    target = derived.genai_path(source, "-hf")
    if not (target / "config.json").is_file():
        with _work() as work:
            with hf_source(source, work) as folder:
                shutil.rmtree(target, ignore_errors=True)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(folder, target)
    return target


@contextmanager
def hf_source(model: ModelRow, work: Path) -> Iterator[Path]:
    """The uploaded Hugging Face folder of an `hf-genai` model, unzipped again (safezip)."""
    if model.format != FORMAT_HF:
        raise UserError(
            f"Model {model.name} was uploaded as an ONNX Runtime GenAI folder, so there are no "
            "Hugging Face weights to rebuild or export from; upload the Hugging Face folder."
        )
    original = next(a for a in library.list_artifacts(model.id) if a.kind == "original")
    with extracted(library.artifact_path(original.sha256), parent=work) as folder:
        configs = sorted(folder.rglob("config.json"), key=lambda p: len(p.parts))
        yield configs[0].parent


def variant_meta(
    source: ModelRow, kind: str, chosen: dict[str, Any], variant: WeightOnlyVariant
) -> dict[str, Any]:
    """What a stored variant says about itself (calibration text is not kept, only its size)."""
    text = chosen.get("calibration_text") or ""
    return {
        "variant_of": source.id,
        "variant": {
            "kind": kind,
            **chosen,
            "calibration_text": f"{len(text)} characters",
            "calibration_sha256": calibration_sha256(text),
        },
        "facts": variant.facts.to_dict(),
        "statement": variant.statement(),
    }


def calibration_sha256(text: str) -> str | None:
    """What tells two GPTQ variants of one config apart (None: no calibration text)."""
    return hashlib.sha256(text.encode()).hexdigest() if text else None


def store_folder(
    folder: Path, name: str, meta: dict[str, Any], provenance: Provenance = Provenance()
) -> ModelRow:
    """Register a GenAI folder as a library model (all or nothing, as ingest does)."""
    plan = plan_genai_folder(folder, name, FORMAT_GENAI, meta)
    store = library.store()
    paths = [path for _, path, _, _ in plan.files]
    decoder = next(i for i, (_, _, _, m) in enumerate(plan.files) if m.get("role") == "decoder")
    with store.putting(paths) as stored:
        artifacts = [
            NewArtifact(kind, blob.sha256, blob.size_bytes, stored_name, file_meta)
            for (kind, _, stored_name, file_meta), blob in zip(plan.files, stored, strict=True)
        ]
        return model_store.create_model(
            name=name[:255],
            sha256=stored[decoder].sha256,
            format=plan.format,
            size_bytes=sum(blob.size_bytes for blob in stored),
            metadata=plan.metadata,
            artifacts=artifacts,
            provenance=provenance,
        )
