"""A Hugging Face folder's bytes for the roofline (the torch runtime): weights from the
safetensors headers (no tensor is read), the KV cache's shape from config.json."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from backend.errors import UserError
from backend.generate.footprint import Footprint, footprint

SAFETENSORS_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I8": 1, "U8": 1}
SAFETENSORS_DTYPE = {"F32": "fp32", "F16": "fp16", "BF16": "bf16"}
HEADER_CAP = 100 << 20  # a safetensors header is JSON of at most a few MB


def model_footprint(folder: Path) -> Footprint:
    """footprint() of a GenAI or OpenVINO folder, hf_footprint() of a Hugging Face one."""
    folder = Path(folder)
    names = ("genai_config.json", "openvino_model.xml")
    if not any((folder / n).is_file() for n in names) and any(folder.glob("*.safetensors")):
        return hf_footprint(folder)
    return footprint(folder)


def _header(path: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file: name -> {dtype, shape, data_offsets}."""
    with path.open("rb") as handle:
        size = struct.unpack("<Q", handle.read(8))[0]
        if size > HEADER_CAP:
            raise UserError(f"{path.name} has a {size}-byte header; it is not a safetensors file.")
        header = json.loads(handle.read(size))
    header.pop("__metadata__", None)
    return header


def hf_footprint(folder: Path) -> Footprint:
    """Every tensor counted once: a tied lm_head is the token embedding, which save_pretrained
    stores once, and a decode step reads it whole (the lm_head), so it is no lookup table then;
    an untied embedding is read a row per token."""
    folder = Path(folder)
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{folder.name} has no readable config.json ({exc}).") from None
    tensors: dict[str, tuple[str, int]] = {}
    files = sorted(folder.glob("*.safetensors"))
    for path in files:
        for name, info in _header(path).items():
            count = 1
            for dim in info["shape"]:
                count *= int(dim)
            tensors[name] = (info["dtype"], count * SAFETENSORS_BYTES.get(info["dtype"], 4))
    by_dtype: dict[str, int] = {}
    for dtype, size in tensors.values():
        by_dtype[dtype] = by_dtype.get(dtype, 0) + size
    floats = {k: v for k, v in by_dtype.items() if k in SAFETENSORS_DTYPE}
    dominant = max(floats, key=floats.get) if floats else ""
    precision = SAFETENSORS_DTYPE.get(dominant, "unknown")
    hidden, vocab = int(config["hidden_size"]), int(config["vocab_size"])
    heads = int(config["num_attention_heads"])
    embedding = next((n for n in tensors if n.endswith("embed_tokens.weight")), "")
    tied = bool(config.get("tie_word_embeddings")) or not any(
        n.endswith("lm_head.weight") for n in tensors
    )
    lookup = 0 if tied or not embedding else tensors[embedding][1]
    row = tensors[embedding][1] // vocab if embedding else hidden * 4
    return Footprint(
        layers=int(config["num_hidden_layers"]),
        kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        kv_item_bytes=SAFETENSORS_BYTES.get(dominant, 4),
        context_length=int(config.get("max_position_embeddings", 0)),
        weight_bytes=sum(size for _, size in tensors.values()),
        lookup_bytes=lookup,
        embedding_row_bytes=0 if tied else row,
        precision=precision,
        file_bytes=sum(p.stat().st_size for p in files),
    )
