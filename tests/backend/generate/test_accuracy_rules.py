"""The generation benchmark's rules that need no model: the text cap, greedy agreement, the
roofline arithmetic, and the spec's refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backend.errors import UserError
from backend.generate import cli_verbs, points, reportframe
from backend.generate.benchmark import (
    GenerationReport,
    GenerationResult,
    GenerationSpec,
    prompts_for,
)
from backend.generate.cli_verbs import HEADERS
from backend.generate.dramshare import dram_share, of_peak
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


def test_the_page_the_report_frame_and_the_cli_agree_on_a_share_of_dram_peak() -> None:
    """No share of the DRAM peak for a decode step held in cache: one rule (dramshare), read by
    the Compare page's frame, the CLI report's frame and the CLI's `of peak` cell, which each
    wrote it once."""
    peak = PeakBandwidth("cpu", 25e9, "copy", "L3", 32 * 2**20, "sysfs")
    cached = roofline(2**20, 0.05, peak).to_dict()  # 1 MB a step, in the 32 MB L3
    dram = roofline(2**30, 80.0, peak).to_dict()  # 1 GB a step: 13.4 GB/s of DRAM, 54% of 25
    assert (cached["in_cache"], dram["in_cache"]) == (True, False)
    share = dram["fraction"]
    assert [dram_share(r) for r in (cached, dram)] == [None, share]
    page = [points.bandwidth_columns(r, True)["bandwidth_fraction"] for r in (cached, dram)]
    assert page == [None, share]
    report = GenerationReport("folder", {}, peak.to_dict())
    report.results = [GenerationResult("ort-genai", 16, 8, 1, roofline=r) for r in (cached, dram)]
    frame = reportframe.generation_frame(report)
    assert pd.isna(frame["bandwidth_fraction"][0]) and frame["bandwidth_fraction"][1] == share
    assert [of_peak(r) for r in (cached, dram)] == ["in cache", "54%"]
    cells = [row[HEADERS.index("of peak")] for row in cli_verbs.rows_of(report)]
    assert cells == ["in cache", f"{share:.0%}"]


def test_the_cli_says_why_no_share_is_shown_once_naming_the_points_it_covers() -> None:
    """`show` and `generate` wrote "of peak, POINT: the 1 MB a decode step reads ... fit in the
    32 MB L3" once a point; the page said it once, naming them."""
    peak = PeakBandwidth("cpu", 25e9, "copy", "L3", 32 * 2**20, "sysfs")
    steps = {"a": 2**20, "b": 2**21, "c": 2**30}  # two steps in the L3, one from DRAM
    named = [(name, roofline(step, 0.05, peak).to_dict()) for name, step in steps.items()]
    assert cli_verbs.roofline_notes(named) == [
        "No share of peak bandwidth is shown for 2 points (a; b): the 1 to 2 MB a decode step "
        "reads (weights less the lookup tables, + KV cache) fit in the 32 MB L3, so the share "
        "would be of cache traffic, not a memory-bandwidth figure."
    ]


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
