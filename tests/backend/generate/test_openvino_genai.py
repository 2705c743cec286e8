"""OpenVINO GenAI beside ONNX Runtime GenAI on the fixture's trained tiny Llama: the HF folder
exported to a stateful IR (backend/generate/ovexport.py, through llm_models), then benchmarked
and scored side by side."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend.generate.benchmark import GenerationSpec
from backend.generate.measuring import run_generation
from backend.generate.perplexity import perplexity
from backend.runtimes import open_genai
from tests import llm_models

pytest.importorskip("openvino_genai")
pytest.importorskip("onnxruntime_genai")


@pytest.fixture(scope="module")
def openvino_folder(tiny_llama) -> Path:
    return llm_models.built_openvino_folder(tiny_llama.spec)


def test_openvino_genai_runs_beside_ort_genai_with_exact_counts(
    openvino_folder, tiny_llama
) -> None:
    fp32 = llm_models.built_genai_folder(tiny_llama.spec, "fp32")
    spec = GenerationSpec(
        runtimes=("ort-genai", "openvino-genai"),
        prompt_lengths=(48,),
        new_tokens=(10,),
        sequences=(1, 2),
        preset="quick",
    )
    report = run_generation(fp32, spec, reference=fp32, openvino_folder=openvino_folder)
    assert [(r.runtime, r.status) for r in report.results] == [
        ("ort-genai", "ok"),
        ("ort-genai", "ok"),
        ("openvino-genai", "ok"),
        ("openvino-genai", "ok"),
    ]
    for r in report.results:
        assert np.asarray(r.tokens).shape == (r.sequences, 10)
        assert 0 < r.ttft_p50_ms <= r.ttft_p99_ms and 0 < r.itl_p50_ms <= r.itl_p99_ms
        assert len(r.agreement) == r.sequences
    ov = report.results[2]
    # what ran is the runtime's own answer, not the request: the CPU plugin's compute precision
    assert ov.facts["inference_precision"] in ov.precision or ov.precision == "fp32"
    assert ov.facts["kv_cache_precision"]
    assert "measured in the sandboxed, limited child (one per runtime)" in report.notes


def test_openvino_perplexity_through_its_state_matches_its_full_pass_and_ort(
    openvino_folder, tiny_llama
) -> None:
    with open_genai("openvino-genai", openvino_folder) as session:
        ids = session.encode(tiny_llama.eval_text)
        through_state = perplexity(session, ids, window=128, chunk=16, max_tokens=512)
        one_pass = perplexity(session, ids, window=128, chunk=128, max_tokens=512)
    with open_genai("ort-genai", llm_models.built_genai_folder(tiny_llama.spec, "fp32")) as session:
        assert session.encode(tiny_llama.eval_text) == ids  # one tokenizer, two runtimes
        ort = perplexity(session, ids, window=128, chunk=128, max_tokens=512)
    assert through_state.perplexity == pytest.approx(one_pass.perplexity, rel=1e-3)
    # OpenVINO computes in bf16 on CPUs with AMX/AVX-512 BF16: close to FP32, not equal
    assert through_state.perplexity == pytest.approx(ort.perplexity, rel=0.02)


def test_several_sequences_keep_the_pipelines_token_times_not_the_calls_tail(
    openvino_folder,
) -> None:
    """LLMPipeline streams one sequence only, so several are timed by its own token times. They
    are on perf_counter_ns's clock: anchoring the last token at the call's end put the work after
    it (0.1-0.2 ms of a 0.47 ms time to first token at 4 sequences) before the first token."""
    import time

    import openvino as ov
    import openvino_genai

    from backend.runtimes.genai_openvino import pipeline_stamps

    prompts = np.random.default_rng(0).integers(3, 512, size=(4, 48)).astype(np.int64)
    with open_genai("openvino-genai", openvino_folder) as session:
        assert session.generate(prompts, 8).tokens.shape == (4, 8)
        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = config.min_new_tokens = 8
        config.ignore_eos, config.do_sample = True, False
        inputs = openvino_genai.TokenizedInputs(
            ov.Tensor(prompts), ov.Tensor(np.ones_like(prompts))
        )
        start = time.perf_counter_ns()
        result = session.pipeline.generate(inputs, config)
        end = time.perf_counter_ns()
    times = list(result.perf_metrics.raw_metrics.m_new_token_times)
    stamps = pipeline_stamps(times, start, end)
    assert stamps == [round(t * 1e6) - start for t in times]  # where the pipeline saw each token
    assert 0 < stamps[0] < stamps[-1] < end - start  # the call returned after its last token
