"""The OpenVINO path: the trained tiny Llama exported to a stateful IR that openvino_genai's
LLMPipeline runs (greedy text equal to transformers' own), and NNCF INT4 that really is INT4."""

from __future__ import annotations

import os

import pytest

from backend.errors import UserError
from backend.generate.ovexport import NncfConfig
from tests import llm_models

PROMPT = "The assert statement"


def ov_greedy(folder, tokens: int = 20) -> str:
    import openvino_genai

    pipe = openvino_genai.LLMPipeline(str(folder), "CPU")
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens, config.do_sample = tokens, False
    return pipe.generate(PROMPT, config)


def hf_greedy(folder, tokens: int = 20) -> str:
    os.environ.setdefault("USE_TF", "0")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=tokens, do_sample=False, min_new_tokens=tokens)
    return tokenizer.decode(out[0][ids.shape[1] :])


def test_export_runs_in_llm_pipeline_with_transformers_greedy_text(tiny_llama) -> None:
    folder = llm_models.built_openvino_folder(llm_models.TINY)
    names = {p.name for p in folder.iterdir()}
    assert {"openvino_model.xml", "openvino_tokenizer.xml", "openvino_detokenizer.xml"} <= names
    assert ov_greedy(folder) == hf_greedy(tiny_llama.folder)


def test_gqa_export_runs_in_llm_pipeline(tiny_gqa_llama) -> None:
    folder = llm_models.built_openvino_folder(llm_models.TINY_GQA)
    assert ov_greedy(folder) == hf_greedy(tiny_gqa_llama.folder)


def test_nncf_int4_holds_4_bit_weights_and_generates(tmp_path) -> None:
    from backend.generate.ovexport import compress_openvino

    fp32 = llm_models.built_openvino_folder(llm_models.TINY)
    variant = compress_openvino(fp32, tmp_path / "int4", NncfConfig("INT4_SYM", 32, 1.0))
    by_type = variant.facts.bytes_by_type
    # The 14 projection weights (7 per layer, 128x128 to 128x384) become int4 with f16 scales;
    # NNCF keeps the embedding and the LM head at int8 (u8) by default.
    projections = 2 * (128 * 128 * 4 + 128 * 256 * 3)
    assert by_type["i4"] == projections // 2
    assert by_type["f16"] >= projections // 32 * 2  # one f16 scale per group of 32
    assert by_type.get("f32", 0) < 64 << 10  # norms and rotary tables only
    assert "nncf int4_sym g32 r1" in variant.statement() and "i4 0.16 MB" in variant.statement()
    assert ov_greedy(variant.folder).strip()


def test_int4_roofline_counts_the_embedding_as_nncf_stored_it() -> None:
    """A decode step reads every weight but the embedding table, of which one row per token.
    NNCF stores the 512 x 128 table as u8 with an f16 scale and a u8 zero point per row; counting
    it as an fp32 table (262,144 bytes) took 3x its size off the step: 101,432 bytes a step
    where 296,123 are read, "2% of peak" for 5% (1 sequence, prompt 64, 32 new tokens)."""
    from backend.generate.footprint import footprint

    fp32 = footprint(llm_models.built_openvino_folder(llm_models.TINY))
    assert (fp32.lookup_bytes, fp32.embedding_row_bytes) == (512 * 128 * 4, 128 * 4)
    int4 = footprint(
        llm_models.built_openvino_folder(llm_models.TINY, NncfConfig("INT4_SYM", 32, 1.0))
    )
    assert int4.lookup_bytes == 512 * (128 + 2 + 1)
    assert int4.embedding_row_bytes == 128 + 2 + 1
    projections, lm_head = 2 * (128 * 128 * 4 + 128 * 256 * 3) // 2, 512 * 128  # i4, u8
    assert int4.bytes_per_step(0, 1) > projections + lm_head
    assert int4.weight_bytes - int4.lookup_bytes < projections + lm_head + 40_000  # scales, norms


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "NF4"}, "NNCF mode 'NF4' is not offered"),
        ({"group_size": 48}, "Group size 48 is not supported"),
        ({"ratio": 0.0}, "Ratio 0.0 is not in"),
    ],
)
def test_bad_nncf_settings_get_one_sentence(kwargs, message) -> None:
    with pytest.raises(UserError, match=message):
        NncfConfig(**kwargs)
