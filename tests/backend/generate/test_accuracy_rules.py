"""The generation benchmark's rules that need no model: the text cap, greedy agreement, the
roofline arithmetic, and the spec's refusals."""

from __future__ import annotations

import numpy as np
import pytest

from backend.errors import UserError
from backend.generate.benchmark import GenerationSpec, prompts_for
from backend.generate.perplexity import read_text, tokens_until_divergence
from backend.generate.roofline import PeakBandwidth, roofline
from backend.runtimes import genai_status, open_genai


def test_a_text_over_the_cap_is_refused_before_it_is_read(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPTIBOARD_PERPLEXITY_TEXT_MB", "0.5")
    text = tmp_path / "corpus.txt"
    text.write_bytes(b"a" * (600 << 10))
    with pytest.raises(UserError) as refused:
        read_text(text)
    assert str(refused.value) == (
        "The perplexity text corpus.txt is 0.6 MB, over the 0.5 MB cap "
        "(OPTIBOARD_PERPLEXITY_TEXT_MB); give a shorter text."
    )
    text.write_bytes(b"\xff\xfe not utf-8 \xff")
    with pytest.raises(UserError, match="is not UTF-8 text"):
        read_text(text)


def test_agreement_counts_tokens_until_the_first_divergence() -> None:
    reference = np.array([[5, 6, 7, 8], [1, 2, 3, 4]])
    ours = np.array([[5, 6, 9, 8], [1, 2, 3, 4]])
    assert tokens_until_divergence(ours, reference) == [2, 4]
    assert tokens_until_divergence(np.array([9, 6]), np.array([5, 6])) == [0]


def test_roofline_is_bytes_per_step_over_inter_token_latency() -> None:
    peak = PeakBandwidth("test device", 4.8e12, "datasheet")
    point = roofline(bytes_per_step=2.47e9, itl_ms=1.0, peak=peak)
    assert point.achieved_bytes_s == pytest.approx(2.47e12)
    assert point.fraction == pytest.approx(2.47 / 4.8)
    assert roofline(1e9, 0.0, peak).fraction == 0.0


def test_bad_spec_values_get_one_sentence() -> None:
    with pytest.raises(UserError, match="--sequences takes positive integers"):
        GenerationSpec(sequences=(0,))
    with pytest.raises(UserError, match="Unknown preset 'fast'"):
        GenerationSpec(preset="fast")
    spec = GenerationSpec(prompt_lengths=(8, 16), sequences=(1, 4))
    assert GenerationSpec.from_dict(spec.to_dict()) == spec
    assert len(spec.points()) == 4


def test_prompts_come_from_the_text_when_it_is_long_enough() -> None:
    text_ids = list(range(100, 200))
    prompts = prompts_for(512, 10, 3, seed=0, text_ids=text_ids)
    assert prompts.shape == (3, 10) and prompts[0, 0] == 100
    random = prompts_for(512, 10, 3, seed=0, text_ids=[1, 2])
    assert random.shape == (3, 10) and random.min() >= 3 and random.max() < 512


def test_unknown_generative_runtime_says_which_exist(tmp_path) -> None:
    assert not genai_status("vllm").available
    with pytest.raises(UserError, match="choose from ort-genai, openvino-genai"):
        open_genai("vllm", tmp_path)
