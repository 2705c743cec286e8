"""The trained tiny Llama on the real Triton server (decoupled, streamed): the tokens it streams are
the tokens ONNX Runtime GenAI generates in-process, and a load point's goodput counts exactly the
requests that met the SLO. One server for the module."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import numpy as np
import pytest

from backend.serving.llm import STREAM_PATH, LlmServing, folder_facts, serve_llm
from backend.serving.llm_loadgen import measure_records, prompts_of, stream_request, summarize
from backend.serving.llm_types import PromptShape, TokenSlo
from backend.serving.server import TritonEnvironment, TritonServer
from backend.serving.types import LoadSpec, Scenario
from backend.specs import MEASURE_PRESETS
from tests import runtime_envs
from tests.llm_models import built_genai_folder

SHAPE = PromptShape(prompt_tokens=12, output_tokens=10)


@pytest.fixture(scope="module")
def genai_folder() -> Path:
    return built_genai_folder()


@pytest.fixture(scope="module")
def llm_server(triton_environment: TritonEnvironment, genai_folder: Path) -> Iterator[TritonServer]:
    serving = LlmServing(instances=1, sequences_per_instance=2)
    with serve_llm(genai_folder, serving, environment=triton_environment) as server:
        yield server


async def _stream(server: TritonServer, prompt: list[int], tokens: int) -> tuple[list, list, str]:
    url = f"http://{server.endpoint.http_url}{STREAM_PATH}"
    async with aiohttp.ClientSession() as session:
        return await stream_request(session, url, prompt, tokens)


def test_streamed_tokens_are_the_tokens_genai_generates_in_process(
    llm_server: TritonServer, genai_folder: Path
) -> None:
    from backend.runtimes.genai_ort import OrtGenAISession

    vocab = folder_facts(genai_folder).vocab_size
    prompts = prompts_of(vocab, SHAPE, seed=3)[:2]
    session = OrtGenAISession(genai_folder, "cpu")
    try:
        for prompt in prompts:
            expected = session.generate(np.asarray([prompt]), SHAPE.output_tokens).tokens[0]
            stamps, tokens, error = asyncio.run(_stream(llm_server, prompt, SHAPE.output_tokens))
            assert error == ""
            assert tokens == [int(t) for t in expected]  # one streamed response per token
            assert len(stamps) == SHAPE.output_tokens
    finally:
        session.close()


def test_a_prompt_past_the_context_gets_the_reason_and_the_server_keeps_serving(
    llm_server: TritonServer, genai_folder: Path
) -> None:
    context = folder_facts(genai_folder).context_length
    _, tokens, error = asyncio.run(_stream(llm_server, [5] * context, 4))
    assert tokens == [] and "exceed the model's context" in error
    _, tokens, error = asyncio.run(_stream(llm_server, [5, 6, 7], 3))
    assert error == "" and len(tokens) == 3


def test_goodput_counts_only_the_requests_that_met_the_slo(
    llm_server: TritonServer, genai_folder: Path
) -> None:
    vocab = folder_facts(genai_folder).vocab_size
    spec = LoadSpec(Scenario.CONCURRENCY, duration_s=1.5, concurrency=2)
    measure = MEASURE_PRESETS["quick"]
    records = asyncio.run(measure_records(llm_server.endpoint, spec, SHAPE, vocab, measure))
    good = [r for r in records if r.ok]
    assert good and len(good) == len(records)
    for record in good:
        assert len(record.tokens) == SHAPE.output_tokens
        assert 0 < record.ttft_ms <= 1000 * (record.done_s - record.sent_s)
        assert record.itl_mean_ms <= record.itl_p99_ms + 1e-9 or len(record.itl_ms) < 2

    def point(slo: TokenSlo):  # noqa: ANN202
        return summarize(records, spec, SHAPE, slo, measure, llm_server.endpoint, "1 x 2")

    nothing = point(TokenSlo(ttft_ms=1e-6, itl_ms=1e-6))
    everything = point(TokenSlo(ttft_ms=1e9, itl_ms=1e9))
    assert nothing.met_slo == 0 and nothing.goodput_rps == 0.0
    assert everything.met_slo == len(good)
    assert everything.goodput_rps == pytest.approx(everything.point.achieved_rps)
    # a bound between the fastest and the slowest first token splits the requests
    ttfts = sorted(r.ttft_ms for r in good)
    split = point(TokenSlo(ttft_ms=ttfts[len(ttfts) // 2], itl_ms=1e9))
    assert split.met_slo == sum(t <= ttfts[len(ttfts) // 2] for t in ttfts) < len(good)
    assert nothing.ttft.p50 <= nothing.point.latency.p50
    assert nothing.itl is not None and nothing.itl.count == len(good) * (SHAPE.output_tokens - 1)
    assert nothing.itl_request_mean is not None and nothing.itl_request_mean.count == len(good)
    assert everything.output_tokens_per_s == pytest.approx(
        everything.point.achieved_rps * SHAPE.output_tokens
    )


def test_a_poisson_point_measured_from_the_child_round_trips_as_json(
    llm_server: TritonServer, genai_folder: Path
) -> None:
    from backend.serving.llm_cli import llm_row
    from backend.serving.llm_loadgen import run_llm_load_in_child
    from backend.serving.llm_types import LlmLoadPoint

    vocab = folder_facts(genai_folder).vocab_size
    spec = LoadSpec(Scenario.SERVER, duration_s=1.0, target_rps=20)
    slo = TokenSlo(ttft_ms=1e9, itl_ms=1e9)
    point = run_llm_load_in_child(llm_server.endpoint, spec, SHAPE, vocab, slo, serving="1 x 2")
    assert point.point.scenario is Scenario.SERVER and point.point.errors == 0
    assert point.met_slo == point.ttft.count > 0
    assert LlmLoadPoint.from_dict(point.to_dict()) == point
    assert llm_row(point)[0] == "20 req/s"
    # no environment asked: .triton-venv's own onnxruntime, as the model printed it
    assert point.point.runtime_env == "default" and point.point.onnxruntime


def test_serve_llm_on_an_environment_runs_genai_on_its_onnxruntime(
    genai_folder: Path, triton_environment: TritonEnvironment, capsys: pytest.CaptureFixture[str]
) -> None:
    """`serve llm --env ort-1.31`: .triton-venv's onnxruntime-genai loads the environment's
    onnxruntime (1.31.1), every request streams its tokens, and the CLI says what ran."""

    from backend.cli import main

    runtime_envs.set_up("ort-1.31")
    argv = ["serve", "llm", str(genai_folder), "--env", "ort-1.31", "--concurrency", "1"]
    argv += ["--duration", "1", "--prompt-tokens", "12", "--output-tokens", "10"]
    assert main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("served: 1 instance(s) x 1 sequence(s) on cpu, onnxruntime 1.31.1 ")
    assert "(ort-1.31); 12 prompt tokens, exactly 10 output tokens" in first
