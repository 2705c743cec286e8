"""What a Hugging Face model folder must be before the model builder may read it.

Checked in this process from file names and config.json (a small JSON file, size-capped) only:
weights must be safetensors (a pickle is never loaded, not even in the sandbox), a tokenizer.json
must be there for generation and perplexity, no custom code may be asked for, and the
architecture must be one that onnxruntime-genai's model builder converts.

It stands low, beside errors.py, because two floors read a Hugging Face folder: the model builder
at upload and the torch generative runtime (backend/runtimes/genai_torch.py), which checks again.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.errors import UserError

CONFIG_CAP = 1 << 20  # bytes of config.json read; real ones are a few kB
# onnxruntime_genai 0.18.0 models/builder.py create_model: the decoder-only text architectures
# it dispatches on (config.architectures[0]); multimodal and speech ones are left out on purpose.
SUPPORTED_ARCHITECTURES = {
    "ChatGLMModel": "chatglm",
    "Ernie4_5ForCausalLM": "ernie4_5",
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "GraniteForCausalLM": "granite",
    "InternLM2ForCausalLM": "internlm2",
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "NemotronForCausalLM": "nemotron",
    "OlmoForCausalLM": "olmo",
    "PhiForCausalLM": "phi",
    "Phi3ForCausalLM": "phi3",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "SmolLM3ForCausalLM": "smollm3",
}
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
OTHER_WEIGHT_SUFFIXES = (".h5", ".msgpack", ".gguf")
TOKENIZER_FILE = "tokenizer.json"
BUILDER_MODULES = ("torch", "transformers", "onnxruntime_genai", "safetensors")


@dataclass(frozen=True)
class HfFolder:
    """A checked Hugging Face folder: where it is, its config and the architecture named there."""

    path: Path
    config: dict[str, Any]
    architecture: str
    model_type: str
    safetensors: tuple[str, ...]


def is_hf_only(folder: Path) -> bool:
    """A Hugging Face folder (config.json, no genai_config.json): the torch runtime's format."""
    folder = Path(folder)
    return (folder / "config.json").is_file() and not (
        (folder / "genai_config.json").is_file() or (folder / "openvino_model.xml").is_file()
    )


def builder_missing() -> str:
    """'' when the model builder's requirements import here, else which ones are missing."""
    return ", ".join(name for name in BUILDER_MODULES if not _importable(name))


def _importable(name: str) -> bool:
    """Found without importing it (torch and transformers take seconds to import)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken or blocked installation
        return False


def require_builder() -> None:
    """UserError naming the missing optional packages (requirements-genai.txt)."""
    missing = builder_missing()
    if missing:
        raise UserError(
            f"Hugging Face model folders are converted with onnxruntime-genai's model builder, "
            f"which needs {missing} (not installed here); install requirements-genai.txt, or "
            "upload an ONNX Runtime GenAI model folder (model.onnx and genai_config.json) instead."
        )


def is_hf_folder(files: list[Path]) -> bool:
    """True when the extracted zip looks like a Hugging Face model folder (config.json + weights
    of any kind, so that pickled weights get their own refusal rather than 'no model found')."""
    names = {p.name for p in files}
    weights = [p for p in files if p.suffix.lower() in (".safetensors", *PICKLE_SUFFIXES)]
    return "config.json" in names and bool(weights)


def check_hf_folder(folder: Path, shown: str) -> HfFolder:
    """Refuse anything the builder must not or cannot read, one sentence each."""
    folder = Path(folder)
    files = [p for p in folder.rglob("*") if p.is_file()]
    pickled = sorted(p.relative_to(folder).as_posix() for p in files if _is_pickle(p))
    if pickled:
        raise UserError(
            f"The zip {shown!r} holds pickled weights ({', '.join(pickled[:3])}), which are never "
            "loaded here because unpickling runs code; save the model with "
            "save_pretrained(safe_serialization=True) and zip the .safetensors files instead."
        )
    other = sorted(p.name for p in files if p.suffix.lower() in OTHER_WEIGHT_SUFFIXES)
    if other:
        raise UserError(
            f"The zip {shown!r} holds weights in a format the model builder does not read here "
            f"({', '.join(other[:3])}); save the model as .safetensors and zip the folder again."
        )
    config = _read_config(folder / "config.json", shown)
    safetensors = tuple(sorted(p.name for p in folder.glob("*.safetensors")))
    if not safetensors:
        raise UserError(
            f"The zip {shown!r} has config.json but no .safetensors weights next to it; zip the "
            "whole model folder that save_pretrained wrote."
        )
    if not (folder / TOKENIZER_FILE).is_file():
        raise UserError(
            f"The zip {shown!r} has no tokenizer.json, which generation and perplexity need; save "
            "the fast tokenizer (AutoTokenizer.save_pretrained) into the folder and zip it again."
        )
    if config.get("auto_map") or any(p.suffix == ".py" for p in files):
        raise UserError(
            f"The model in {shown!r} asks for its own Python code (auto_map or .py files), which "
            "is never run here; upload a model whose architecture transformers ships."
        )
    architectures = config.get("architectures") or []
    architecture = architectures[0] if isinstance(architectures, list) and architectures else ""
    model_type = str(config.get("model_type", ""))
    if architecture not in SUPPORTED_ARCHITECTURES:
        supported = ", ".join(sorted(set(SUPPORTED_ARCHITECTURES.values())))
        named = architecture or "no architecture"
        raise UserError(
            f"The model in {shown!r} is a {model_type or 'model'} ({named}), which "
            f"onnxruntime-genai's model builder cannot convert; it converts: {supported}."
        )
    return HfFolder(folder, config, architecture, model_type, safetensors)


def _is_pickle(path: Path) -> bool:
    """By name, or by the pickle protocol header / torch zip layout for renamed files."""
    if path.suffix.lower() in PICKLE_SUFFIXES:
        return True
    if path.suffix.lower() in (".json", ".safetensors", ".txt", ".model", ".md"):
        return False
    with open(path, "rb") as handle:
        head = handle.read(4)
    return head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")


def _read_config(path: Path, shown: str) -> dict[str, Any]:
    if not path.is_file():
        raise UserError(
            f"The zip {shown!r} has no config.json at the top of the model folder; zip the "
            "folder that save_pretrained wrote."
        )
    if path.stat().st_size > CONFIG_CAP:
        raise UserError(
            f"The config.json in {shown!r} is over {CONFIG_CAP >> 10} kB, far larger than a "
            "model configuration; check that the zip holds the right folder."
        )
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(
            f"The config.json in {shown!r} is not valid JSON ({exc}); save it again with "
            "save_pretrained."
        ) from None
    if not isinstance(config, dict):
        raise UserError(f"The config.json in {shown!r} is not a JSON object; save it again.")
    return config
