"""What a Hugging Face folder must be before the builder reads it, checked from names and
config.json alone (fast: no training, no builder, no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from backend.errors import UserError
from backend.hfcheck import SUPPORTED_ARCHITECTURES, check_hf_folder, is_hf_folder

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8}


def hf_folder(root: Path, config: dict | None = None, weights: str = "safetensors") -> Path:
    folder = root / "hf"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config or LLAMA))
    (folder / "tokenizer.json").write_text("{}")
    if weights == "safetensors":
        save_file({"w": np.zeros((2, 2), np.float32)}, str(folder / "model.safetensors"))
    else:
        (folder / weights).write_bytes(b"\x80\x04\x95")  # a pickle's first bytes
    return folder


def test_a_llama_folder_passes_and_names_its_architecture(tmp_path: Path) -> None:
    checked = check_hf_folder(hf_folder(tmp_path), "llama.zip")
    assert (checked.architecture, checked.model_type) == ("LlamaForCausalLM", "llama")
    assert checked.safetensors == ("model.safetensors",)
    assert SUPPORTED_ARCHITECTURES["LlamaForCausalLM"] == "llama"


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "weights.ckpt"])
def test_pickled_weights_are_refused_by_name(tmp_path: Path, name: str) -> None:
    folder = hf_folder(tmp_path, weights=name)
    assert is_hf_folder(list(folder.iterdir()))  # routed here, so the refusal is the right one
    with pytest.raises(UserError, match=f"pickled weights \\({name}\\).*never loaded"):
        check_hf_folder(folder, "x.zip")


def test_a_renamed_pickle_is_refused_by_its_header(tmp_path: Path) -> None:
    folder = hf_folder(tmp_path)
    (folder / "extra.data").write_bytes(b"\x80\x05\x95\x00")
    with pytest.raises(UserError, match="pickled weights \\(extra.data\\)"):
        check_hf_folder(folder, "x.zip")


def test_missing_tokenizer_unsupported_architecture_and_custom_code(tmp_path: Path) -> None:
    folder = hf_folder(tmp_path)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(UserError, match="has no tokenizer.json"):
        check_hf_folder(folder, "x.zip")
    (folder / "tokenizer.json").write_text("{}")
    bert = {"architectures": ["BertForMaskedLM"], "model_type": "bert"}
    (folder / "config.json").write_text(json.dumps(bert))
    with pytest.raises(UserError, match="is a bert \\(BertForMaskedLM\\).*it converts: chatglm"):
        check_hf_folder(folder, "x.zip")
    (folder / "config.json").write_text(json.dumps({**LLAMA, "auto_map": {"AutoModel": "m.M"}}))
    with pytest.raises(UserError, match="asks for its own Python code"):
        check_hf_folder(folder, "x.zip")


def test_broken_config_and_missing_weights(tmp_path: Path) -> None:
    folder = hf_folder(tmp_path)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(UserError, match="config.json in 'x.zip' is not valid JSON"):
        check_hf_folder(folder, "x.zip")
    (folder / "config.json").write_text(json.dumps(LLAMA))
    (folder / "model.safetensors").unlink()
    with pytest.raises(UserError, match="no .safetensors weights"):
        check_hf_folder(folder, "x.zip")
