"""The torch runtime session on the tests' trained grouped-query Llama: with its layer changes
(grouped decode attention, q/k/v as one matmul) its greedy tokens are those of the model as
transformers loads it, its facts say what ran, and the decode step still traces as one graph
(what --torch-compile needs on a GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import AttentionInterface, AutoModelForCausalLM, StaticCache  # noqa: E402

from backend.generate.benchmark import GenerationSpec  # noqa: E402
from backend.generate.measuring import OWN_REFERENCE, run_generation  # noqa: E402
from backend.runtimes.genai_torch import TorchGenAISession, greedy_step  # noqa: E402
from backend.runtimes.torch_layers import (  # noqa: E402
    ATTENTION_RAN,
    FUSED_RAN,
    GROUPED_DECODE,
    grouped_decode_attention,
)

PROMPTS = np.array([[1, 5, 9, 13, 17, 21, 25, 29], [2, 6, 10, 14, 18, 22, 26, 30]])
NEW = 24


def _greedy(model, step, prompts: np.ndarray, new: int):  # noqa: ANN001, ANN202
    """Prefill, then `new` - 1 one-token steps through `step`, over a fresh StaticCache."""
    ids = torch.as_tensor(prompts)
    cache = StaticCache(config=model.config, max_cache_len=ids.shape[1] + new)
    with torch.inference_mode():
        out = model(
            input_ids=ids,
            cache_position=torch.arange(ids.shape[1]),
            past_key_values=cache,
            use_cache=True,
        )
        tokens = [out.logits[:, -1:].argmax(-1)]
        for at in range(ids.shape[1], ids.shape[1] + new - 1):
            tokens.append(step(tokens[-1], torch.tensor([[at]]), cache))
    return torch.cat(tokens, 1).numpy()


def _as_loaded(folder: Path):  # noqa: ANN202
    model = AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="sdpa").eval()

    return model, lambda tokens, at, cache: greedy_step(model, tokens, at, cache)


def test_a_grouped_query_model_decodes_with_the_tokens_of_the_model_as_loaded(
    tiny_gqa_llama,
) -> None:
    session = TorchGenAISession(tiny_gqa_llama.folder, "cpu")
    assert session.model.config._attn_implementation == GROUPED_DECODE
    assert AttentionInterface()[GROUPED_DECODE] is grouped_decode_attention
    assert session.facts["attention"] == ATTENTION_RAN
    assert session.facts["projections"] == f"{FUSED_RAN} ({tiny_gqa_llama.spec.layers} layers)"
    ours = session.generate(PROMPTS, NEW).tokens
    assert np.array_equal(ours, _greedy(*_as_loaded(tiny_gqa_llama.folder), PROMPTS, NEW))
    # the decode step as --torch-compile traces it: one graph (fullgraph), the same tokens
    traced = torch.compile(session._decode, fullgraph=True, dynamic=False, backend="aot_eager")
    assert np.array_equal(_greedy(session.model, traced, PROMPTS, NEW), ours)


def test_a_cli_run_on_the_folder_alone_compares_with_the_model_as_loaded(tiny_gqa_llama) -> None:
    """In the sandboxed children, as `optiboard generate HF_FOLDER --runtimes torch` runs it: the
    changed layers' tokens against the fp32 model as loaded, point by point."""
    spec = GenerationSpec(
        runtimes=("torch",), prompt_lengths=(16,), new_tokens=(12,), sequences=(1, 2),
        preset="quick",
    )  # fmt: skip
    report = run_generation(tiny_gqa_llama.folder, spec)
    assert [(r.status, r.agreement) for r in report.results] == [("ok", [12]), ("ok", [12, 12])]
    assert OWN_REFERENCE in report.notes
    assert report.results[0].facts["attention"] == ATTENTION_RAN
