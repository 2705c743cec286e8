"""Where the files made from a library model live, outside the artifact store.

The viewer's weightless copies (made by backend/graphview/skeleton.py) and the generative
folders (made by backend/generate/: linked GenAI folders, OpenVINO exports, unzipped HF
uploads) are named here, beside the library that deletes models, so deleting a model removes
them without reaching up into the rooms that make them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import settings
from storage.repo.models import ModelRow


def skeleton_path(sha256: str) -> Path:
    """The weightless viewer copy of the .onnx blob `sha256` (cached per digest)."""
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise ValueError(f"not a sha256 digest: {sha256!r}")
    return settings.data_dir() / "cache" / "graph-skeletons" / f"{sha256}.onnx"


def genai_path(model: ModelRow, suffix: str = "") -> Path:
    """A generative model's folder (suffix "" for its linked GenAI folder, "-hf",
    "-openvino-fp32"... for the others), under the data directory beside artifacts/."""
    return settings.data_dir() / "genai" / f"model-{model.id}-{model.sha256[:12]}{suffix}"


def remove(model_id: int, gone: Iterable[str]) -> None:
    """Remove what was made from a deleted model: the weightless copies of its blobs that are
    `gone` from the store (a blob another model shares keeps its copy) and its generative
    folders."""
    for sha256 in gone:
        skeleton_path(sha256).unlink(missing_ok=True)
    for folder in (settings.data_dir() / "genai").glob(f"model-{model_id}-*"):
        shutil.rmtree(folder, ignore_errors=True)
