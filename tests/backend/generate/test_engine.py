"""ONNX Runtime GenAI's Engine for points past the Generator's 32 sequences (genai_engine.py),
on the tiny Llama trained in the fixture: the same greedy tokens as the Generator, exact counts,
each sequence's own token times, and facts that say which path ran and how many ran together."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from backend import cli
from backend.errors import UserError
from backend.generate.benchmark import GenerationSpec
from backend.runtimes import TokenTimes, open_genai
from backend.runtimes.genai_engine import ENGINE_OVERLAY, engine_overlay, scheduler_words
from tests import llm_models

pytest.importorskip("onnxruntime_genai")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def fp32(tiny_llama) -> Path:
    return llm_models.built_genai_folder(tiny_llama.spec, "fp32")


def _generator_tokens(folder: Path, prompts: np.ndarray, new_tokens: int) -> np.ndarray:
    """The Generator's greedy tokens, at most 32 sequences per batch as it takes them."""
    with open_genai("ort-genai", folder, engine="off") as session:
        parts = [
            session.generate(prompts[i : i + 32], new_tokens) for i in range(0, len(prompts), 32)
        ]
    return np.concatenate([p.tokens for p in parts if p.tokens.size])


@pytest.mark.parametrize("sequences,engine", [(3, "on"), (40, "auto")])
def test_the_engine_decodes_the_generators_greedy_tokens(fp32, sequences, engine) -> None:
    prompts = np.random.default_rng(1).integers(3, 512, size=(sequences, 6))
    with open_genai("ort-genai", fp32, engine=engine) as session:
        assert session.uses_engine(sequences)
        run = session.generate(prompts, 4)
        facts = session.point_facts(sequences, run.together)
    np.testing.assert_array_equal(run.tokens, _generator_tokens(fp32, prompts, 4))
    assert run.tokens.shape == (sequences, 4)  # exactly the tokens asked, EOS masked
    assert run.sequence_ns is not None and [len(s) for s in run.sequence_ns] == [4] * sequences
    # a model without a paged KV cache: the library's static scheduler, batches of 4 at most
    assert facts["engine"].startswith("static batching") and "at most 4" in facts["engine"]
    assert facts["sequences_together"] == run.together == min(sequences, 4)
    assert run.total_ms == max(s[-1] for s in run.sequence_ns) / 1e6


def test_per_sequence_times_give_per_sequence_samples() -> None:
    """Two batches of one run apart: TTFT and gaps are each sequence's own; one step decodes
    one sequence, so decode tokens/s counts one, not two."""
    run = TokenTimes(
        np.zeros((2, 3)), [30, 40, 50], sequence_ns=[[10, 20, 25], [30, 40, 50]], together=1
    )
    assert run.ttft_samples_ms == [10 / 1e6, 30 / 1e6]
    assert run.itl_ms == [10 / 1e6, 5 / 1e6, 10 / 1e6, 10 / 1e6]
    assert run.concurrent == 1 and run.total_ms == 50 / 1e6
    one_batch = TokenTimes(np.zeros((2, 3)), [30, 40, 50])  # the Generator's: unchanged
    assert (one_batch.ttft_samples_ms, one_batch.concurrent) == ([30 / 1e6], 2)


def test_generate_runs_64_sequences_beside_one_through_the_cli(fp32, capsys) -> None:
    argv = ["generate", str(fp32), "--prompt-lengths", "4", "--new-tokens", "3"]
    argv += ["--sequences", "1,64", "--reference", str(fp32), "--preset", "quick"]
    assert cli.main([*argv, "--in-process", "--json"]) == 0
    one, many = json.loads(capsys.readouterr().out)["results"]
    assert (one["status"], many["status"]) == ("ok", "ok")
    assert one["facts"]["engine"] == "off: the Generator ran one batch of 1"
    assert many["facts"]["engine"].startswith("static batching")
    assert many["facts"]["sequences_together"] == 4
    assert np.asarray(many["tokens"]).shape == (64, 3)
    assert many["agreement"] == [3] * 64  # the reference ran 64 through the Engine too
    # batch after batch: the later batches' first tokens come later, and before the end
    assert (
        0 < many["ttft_p50_ms"] < many["ttft_p99_ms"] and many["ttft_p50_ms"] < many["e2e_p50_ms"]
    )
    assert many["output_tokens_per_s"] > 0 and many["decode_tokens_per_s"] > 0


def test_an_unknown_engine_mode_is_refused_with_one_sentence() -> None:
    with pytest.raises(UserError, match=r"^--engine takes auto, on, off, not 'always'\.$"):
        GenerationSpec(engine="always")


def test_a_paged_models_max_batch_is_raised_to_the_points_sequences(tmp_path) -> None:
    """PagedAttention folders (the builder's use_paged_attention=true) name a max batch for the
    Engine's dynamic batching; a point of more sequences reopens the model with it raised."""
    config = {
        "model": {},
        "engine": {"dynamic_batching": {"block_size": 256, "max_batch_size": 16}},
    }
    (tmp_path / "genai_config.json").write_text(json.dumps(config))
    assert engine_overlay(tmp_path, 8) == ENGINE_OVERLAY
    assert engine_overlay(tmp_path, 64)["engine"] == {"dynamic_batching": {"max_batch_size": 64}}
    assert scheduler_words(tmp_path, 64).startswith("continuous batching")
