"""The trained test LLM is a real language model of its text, not random weights."""

from __future__ import annotations

import json
import math

from tests import llm_models


def test_tiny_llama_learns_the_text_and_is_a_complete_hf_folder(tiny_llama) -> None:
    names = {p.name for p in tiny_llama.folder.iterdir()}
    assert set(llm_models.HF_FILES) <= names
    assert not any(name.endswith((".bin", ".pt", ".pth")) for name in names)
    vocab = json.loads((tiny_llama.folder / "config.json").read_text())["vocab_size"]
    # Untrained it is about uniform over the vocabulary; trained it is far below that.
    assert tiny_llama.first_loss > 0.9 * math.log(vocab)
    assert tiny_llama.final_loss < tiny_llama.first_loss - 2.0
    assert tiny_llama.eval_perplexity < vocab / 5  # held-out text, not only the training text


def test_gqa_variant_shares_key_value_heads(tiny_gqa_llama) -> None:
    config = json.loads((tiny_gqa_llama.folder / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert config["num_key_value_heads"] < config["num_attention_heads"]
    assert tiny_gqa_llama.final_loss < tiny_gqa_llama.first_loss - 2.0


def test_tokenizer_round_trips_the_held_out_text(tiny_llama) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tiny_llama.folder / "tokenizer.json"))
    sample = tiny_llama.eval_text[:500]
    ids = tokenizer.encode(sample).ids
    assert len(ids) < len(sample) / 1.5  # merges learnt: well under one token per character
    assert tokenizer.decode(ids) == sample


def test_hf_zip_spoils_on_request(tmp_path, tiny_llama) -> None:
    import zipfile

    names = zipfile.ZipFile(
        llm_models.hf_zip(tmp_path, pickle_weights=True, drop=("tokenizer.json",))
    ).namelist()
    assert "pytorch_model.bin" in names and "model.safetensors" not in names
    assert "tokenizer.json" not in names
