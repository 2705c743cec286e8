"""Zipped generative models as library models: an ONNX Runtime GenAI folder as it is, or a Hugging
Face folder converted by the model builder (hfconvert.py) to one.

It is an upload format beside ONNX, SavedModel and ExportedProgram, so it is checked here in
models/ with them; backend/generate/ works on the library model it becomes.

A generative model keeps its folder: every file is its own artifact of kind `genai` (filename is
its path inside the folder, meta["paths"] every path with that content), so multi-GB external
data is never rewritten into one protobuf and the Graph page, which shows `.onnx` artifacts,
reads only the small model.onnx graph file. genai_folder() links the blobs back into a folder
that onnxruntime_genai (and the quantizers) open. The model's format says it is generative.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend import hfcheck
from backend.errors import UserError
from backend.models import parse
from backend.models.hfconvert import BuilderOptions, build_genai_folder
from storage.artifacts import sha256_file

GENAI_CONFIG = "genai_config.json"
GENAI_KIND = "genai"
FORMAT_GENAI = "genai"  # uploaded as an ONNX Runtime GenAI folder
FORMAT_HF = "hf-genai"  # uploaded as a Hugging Face folder, converted by the model builder
GENERATIVE_FORMATS = (FORMAT_GENAI, FORMAT_HF)
TOKENIZER_FILES = ("tokenizer.json",)
CONFIG_CAP = 1 << 20


@dataclass
class GenerativePlan:
    """What a checked generative upload becomes: format, metadata and (kind, path, name, meta)."""

    format: str
    metadata: dict[str, Any]
    files: list[tuple[str, Path, str, dict[str, Any]]] = field(default_factory=list)


def is_generative_format(fmt: str) -> bool:
    return fmt in GENERATIVE_FORMATS


def wants_generative(files: list[Path], folder: Path) -> bool:
    """True when an extracted zip is a GenAI folder or a Hugging Face folder."""
    names = {p.name for p in files}
    return GENAI_CONFIG in names or hfcheck.is_hf_folder(files)


def plan_generative(files: list[Path], folder: Path, filename: str, work: Path) -> GenerativePlan:
    """The plan for an extracted zip that wants_generative() accepted."""
    configs = [p for p in files if p.name == GENAI_CONFIG]
    if len(configs) > 1:
        shown = ", ".join(p.relative_to(folder).as_posix() for p in configs)
        raise UserError(
            f"The zip {filename!r} holds {len(configs)} genai_config.json files ({shown}); "
            "upload one model folder per zip."
        )
    if configs:
        return plan_genai_folder(configs[0].parent, filename, FORMAT_GENAI, {})
    top = sorted({p.parent for p in files if p.name == "config.json"}, key=lambda p: len(p.parts))
    built = build_genai_folder(top[0], work / "genai", BuilderOptions(), shown=filename)
    log = work / "conversion_log.txt"
    log.write_text(built.log, encoding="utf-8")
    meta = {"builder": built.options.to_dict(), "versions": built.versions}
    meta["architecture"] = built.architecture
    plan = plan_genai_folder(built.folder, filename, FORMAT_HF, meta)
    plan.files.append(("conversion_log", log, "conversion_log.txt", meta))
    return plan


def plan_genai_folder(
    model_dir: Path, shown: str, fmt: str, extra_meta: dict[str, Any]
) -> GenerativePlan:
    """Check a GenAI folder (config, tokenizer, decoder graph and its external data, the latter
    in a child that never reads weights) and list its files to store."""
    model_dir = Path(model_dir).resolve()
    config = read_genai_config(model_dir, shown)
    decoder = _decoder_file(config, model_dir, shown)
    missing = [name for name in TOKENIZER_FILES if not (model_dir / name).is_file()]
    if missing:
        raise UserError(
            f"The model folder in {shown!r} has no {missing[0]}, which generation and perplexity "
            "need; add the tokenizer files the model builder wrote and zip the folder again."
        )
    checked = parse.inspect_external(decoder, model_dir, f"{shown}: {decoder.name}")
    metadata = checked["metadata"]
    by_digest: dict[str, list[Path]] = {}
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        by_digest.setdefault(sha256_file(path), []).append(path)
    plan = GenerativePlan(format=fmt, metadata=metadata)
    for paths in by_digest.values():
        relative = [p.relative_to(model_dir).as_posix() for p in paths]
        meta: dict[str, Any] = {"paths": relative}
        if paths[0].name == GENAI_CONFIG:
            meta |= {"genai_config": config, **extra_meta}
        if paths[0] == decoder:
            meta |= {"role": "decoder", "data_files": checked["locations"]}
        plan.files.append((GENAI_KIND, paths[0], relative[0], meta))
    return plan


def read_genai_config(model_dir: Path, shown: str) -> dict[str, Any]:
    path = Path(model_dir) / GENAI_CONFIG
    if path.stat().st_size > CONFIG_CAP:
        raise UserError(f"The genai_config.json in {shown!r} is over 1 MB; check the zip.")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(
            f"The genai_config.json in {shown!r} is not valid JSON ({exc}); write it again with "
            "the model builder."
        ) from None
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise UserError(
            f"The genai_config.json in {shown!r} has no 'model' section; it is not an ONNX "
            "Runtime GenAI configuration."
        )
    return config


def _decoder_file(config: dict[str, Any], model_dir: Path, shown: str) -> Path:
    decoder = config["model"].get("decoder") or {}
    name = decoder.get("filename") if isinstance(decoder, dict) else None
    if not isinstance(name, str) or not name:
        raise UserError(
            f"The genai_config.json in {shown!r} names no decoder file (model.decoder.filename); "
            "only decoder-only text models are supported."
        )
    path = (model_dir / name).resolve()
    if not path.is_relative_to(model_dir.resolve()) or not path.is_file():
        raise UserError(
            f"The genai_config.json in {shown!r} names the decoder {name!r}, which is not in the "
            "model folder; zip the whole folder the model builder wrote."
        )
    return path
