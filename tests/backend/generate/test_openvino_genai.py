"""OpenVINO GenAI beside ONNX Runtime GenAI on the fixture's trained tiny Llama: the HF folder
exported to a stateful IR (backend/generate/ovexport.py, through llm_models), then benchmarked
and scored side by side."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest

from backend.generate.benchmark import GenerationSpec
from backend.generate.footprint import as_held, footprint
from backend.generate.measuring import run_generation
from backend.generate.perplexity import perplexity
from backend.runtimes import open_genai
from backend.runtimes.genai_openvino import kv_layout, precision_name
from tests import llm_models
from tests.backend.generate.peaks import alone_larger_after

pytest.importorskip("openvino_genai")
pytest.importorskip("onnxruntime_genai")
X86_LAYOUT = kv_layout("u8", "u8", 0, 0, platform.machine()) is not None  # established there


@pytest.fixture(scope="module")
def openvino_folder(tiny_llama) -> Path:
    return llm_models.built_openvino_folder(tiny_llama.spec)


def paged_cache_bytes(folder: Path, sequences: int, prompt: int, new_tokens: int) -> int:
    """The KV cache OpenVINO GenAI's scheduler allocated for these sequences, as it reports it
    (PipelineMetrics.cache_size_in_bytes), under the settings LLMPipeline gives it on a CPU
    (utils::get_latency_oriented_scheduler_config: no token limit, prefix caching)."""
    import openvino as ov
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.max_num_batched_tokens, scheduler.enable_prefix_caching = 2**63, True
    pipe = openvino_genai.ContinuousBatchingPipeline(str(folder), scheduler, "CPU")
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = config.min_new_tokens = new_tokens
    config.ignore_eos, config.do_sample = True, False
    ids = np.random.default_rng(0).integers(3, 512, size=(sequences, 1, prompt))
    pipe.generate([ov.Tensor(row) for row in ids], [config] * sequences)
    return int(pipe.get_metrics().cache_size_in_bytes)


@pytest.mark.skipif(
    not X86_LAYOUT,
    reason="the CPU plugin's KV layout is established on x86-64 only",
)
@pytest.mark.parametrize(
    "properties",
    [
        {},  # the defaults: u8 keys by channel, u8 values by token
        {"VALUE_CACHE_GROUP_SIZE": 16, "KEY_CACHE_GROUP_SIZE": 8},
        {"KEY_CACHE_PRECISION": "u4", "VALUE_CACHE_PRECISION": "u4", "VALUE_CACHE_GROUP_SIZE": 8},
        {"KV_CACHE_PRECISION": "bf16"},
    ],
)
def test_kv_layout_is_the_cpu_plugins_paged_cache(properties) -> None:
    """The layout the session states is the one the installed CPU plugin shapes PagedAttention's
    key_cache.N / value_cache.N inputs in, which GenAI allocates block by block (bytes of a
    block: kv_heads x rows x columns of each input, as its KVCacheManager counts them): u8 keys
    are [blocks, 2, 32 + 8, 32] (an f32 scale and zero point per channel), u8 values
    [blocks, 2, 32, 32 + 8] (one per token), 40 bytes a token and head where the u8 elements
    alone are 32. On the grouped-query tiny Llama: 2 KV heads of 4."""
    import openvino as ov
    from openvino._offline_transformations import paged_attention_transformation

    folder = llm_models.built_openvino_folder(llm_models.TINY_GQA)
    core = ov.Core()
    model = core.read_model(str(folder / "openvino_model.xml"))
    paged_attention_transformation(model)
    compiled = core.compile_model(model, "CPU", properties)
    block = 0
    for cache in (i for i in compiled.inputs if i.get_any_name().split(".")[0].endswith("cache")):
        shape = cache.get_partial_shape()
        rows = shape[1].get_length() * shape[2].get_length() * shape[3].get_length()
        block += rows * cache.get_element_type().bitwidth // 8
    key, value = (
        precision_name(compiled.get_property(f"{k}_CACHE_PRECISION")) for k in ("KEY", "VALUE")
    )
    groups = (int(compiled.get_property(f"{k}_CACHE_GROUP_SIZE")) for k in ("KEY", "VALUE"))
    layout = kv_layout(key, value, *groups, platform.machine())
    shape = as_held(footprint(folder), {"kv_cache_layout": layout})
    assert (shape.layers, shape.kv_heads, shape.head_dim) == (2, 2, 32)
    assert shape.kv_bytes(32, 1) == block  # one block of 32 tokens, every layer
    assert shape.kv_bytes(33, 3) == 6 * block
    if not properties:
        assert block == 2 * 2 * (40 * 32 + 32 * 40)


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
    if X86_LAYOUT:  # KV MB is the paged cache GenAI allocates, as its scheduler reports it
        assert ov.facts["attention_backend"] == "PagedAttention" and ov.facts["kv_cache_layout"]
        # u8 elements alone, 2 x 2 layers x 4 heads x 32 x 58 tokens, were 29,696 bytes a
        # sequence; two blocks of 32 tokens with their scales and zero points are 40,960
        for r in report.results[2:]:
            allocated = paged_cache_bytes(openvino_folder, r.sequences, 48, 10)
            assert r.kv_cache_mb * 2**20 == allocated == 40_960 * r.sequences
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


def scheduler_printed(text: str) -> str:
    """The SchedulerConfig block GenAI prints when it builds a pipeline (OPENVINO_LOG_LEVEL=5)."""
    start = text.index("SchedulerConfig {")
    return text[start : text.index("}", start) + 1]


def test_the_scheduler_runs_without_prefix_caching_and_genai_defaults_otherwise(
    openvino_folder, monkeypatch, capfd
) -> None:
    """LLMPipeline's PagedAttention scheduler reuses a prompt's cached KV blocks, and every run
    of a point repeats its prompts: on a 1,024-token prompt (random Llama, 512 wide, 4 layers)
    the runs after the first took 3.6 ms to their first token where the prefill took 170-400 ms.
    The session's scheduler, as GenAI itself prints it, is LLMPipeline's own with that one
    setting off; the facts and the ran line say so."""
    import openvino_genai

    from backend.reporting.provenance import ran_line

    monkeypatch.setenv("OPENVINO_LOG_LEVEL", "5")  # GenAI reads it as it builds a pipeline
    capfd.readouterr()
    openvino_genai.LLMPipeline(str(openvino_folder), "CPU", ATTENTION_BACKEND="PA")
    default = scheduler_printed(capfd.readouterr().out)
    with open_genai("openvino-genai", openvino_folder) as session:
        ours = scheduler_printed(capfd.readouterr().out)
        facts = session.facts
    assert facts["attention_backend"] == "PagedAttention"
    assert "enable_prefix_caching: true" in default  # GenAI's own default, which we turn off
    assert ours == default.replace("enable_prefix_caching: true", "enable_prefix_caching: false")
    assert facts["prefix_caching"] == "off"
    assert "PagedAttention, prefix caching off: KV MB counts" in ran_line("openvino-genai", facts)


def test_a_point_after_a_larger_one_does_not_hold_its_memory(openvino_folder, tiny_llama) -> None:
    """GenAI keeps its paged KV cache (and the CPU plugin its buffers) for the pipeline's life,
    grown to the largest point so far: in one pipeline, 1 sequence of 200 tokens peaked at
    190.9 MB after a point of 64 sequences (189.2 MB), 137.6 MB as the only point. Each point
    now opens a fresh pipeline, so its peak is its own (140.6 MB after the 64): nearer the
    point alone than the larger point before it."""
    fp32 = llm_models.built_genai_folder(tiny_llama.spec, "fp32")

    alone, larger, after = alone_larger_after(
        fp32, "openvino-genai", 64, openvino_folder=openvino_folder
    )
    assert after < (alone + larger) / 2, (alone, larger, after)
