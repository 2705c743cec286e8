"""The load generator for a served LLM: streamed requests timed token by token.

Each request is a POST to Triton's generate_stream endpoint (server-sent events, one event per
generated token, from the decoupled model of llm.py). The clock starts when the request leaves;
time to first token (TTFT) is the first token's event, the inter-token latencies (ITL) the gaps
between the following events, end-to-end the last one. When requests go out is the serving
scenarios' business (scenarios.py: N in flight, or Poisson arrivals at a rate), through the same
RequestSender protocol the single-pass generator uses; a point is run in a child process started
by the one launcher, so the generator never shares the caller's CPU accounting.

A request succeeds only when it streamed exactly the asked number of tokens; goodput counts the
successful requests that met the SLO (TTFT and the p99 of their own ITLs within bounds).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import aiohttp
import numpy as np

from backend.errors import UserError
from backend.host import HostWatch, contention_note
from backend.launch.children import run_in_child
from backend.results import LatencyStats
from backend.runtimeenvs import DEFAULT
from backend.serving.llm import STREAM_PATH, LlmServing, folder_facts, serve_llm
from backend.serving.llm_types import LlmLoadPoint, PromptShape, TokenSlo
from backend.serving.scenarios import SCENARIOS
from backend.serving.server import ServerEndpoint
from backend.serving.stability import Completed, stability
from backend.serving.types import LoadPoint, LoadSpec
from backend.specs import MEASURE_PRESETS, MeasureSettings

PROMPT_POOL = 16  # distinct seeded prompts the requests take in turn
FIRST_ID = 3  # below: the special tokens (pad, bos, eos) of a builder-made folder
MAX_CONNECTIONS = 1024


@dataclass(frozen=True)
class TokenRecord:
    """One streamed request: when it should have left, left, and each token's arrival (s)."""

    scheduled_s: float | None
    sent_s: float
    token_s: tuple[float, ...]
    tokens: tuple[int, ...]
    ok: bool
    error: str = ""
    burst: int | None = None

    @property
    def done_s(self) -> float:
        return self.token_s[-1] if self.token_s else self.sent_s

    @property
    def ttft_ms(self) -> float:
        return 1000 * (self.token_s[0] - self.sent_s)

    @property
    def itl_ms(self) -> list[float]:
        return [1000 * (b - a) for a, b in zip(self.token_s, self.token_s[1:], strict=False)]

    @property
    def itl_mean_ms(self) -> float:
        gaps = self.itl_ms
        return sum(gaps) / len(gaps) if gaps else 0.0

    @property
    def itl_p99_ms(self) -> float:
        gaps = self.itl_ms
        return float(np.percentile(gaps, 99)) if gaps else 0.0


def prompts_of(vocab: int, shape: PromptShape, seed: int) -> list[list[int]]:
    """PROMPT_POOL seeded prompts of exactly shape.prompt_tokens ids (no tokenizer round trip,
    so the prompt length is exact)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(FIRST_ID, vocab, size=(PROMPT_POOL, shape.prompt_tokens))
    return [[int(t) for t in row] for row in ids]


async def stream_request(
    session: aiohttp.ClientSession, url: str, prompt: Sequence[int], max_tokens: int
) -> tuple[list[float], list[int], str]:
    """POST one prompt to generate_stream; each token's perf_counter arrival, the tokens, and
    an error ('' when none)."""
    body = {"input_ids": list(prompt), "max_tokens": max_tokens}
    stamps: list[float] = []
    tokens: list[int] = []
    async with session.post(url, json=body) as response:
        async for raw in response.content:
            now = time.perf_counter()
            line = raw.decode(errors="replace").strip()
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if "error" in event:
                return stamps, tokens, str(event["error"])
            if "token_id" in event:
                stamps.append(now)
                token = event["token_id"]
                tokens.append(int(token[0] if isinstance(token, list) else token))
        if response.status != 200:
            return stamps, tokens, f"HTTP {response.status}"
    return stamps, tokens, ""


@dataclass
class LlmSender:
    """Sends the pool's prompts in turn and records each streamed request (a RequestSender)."""

    session: aiohttp.ClientSession
    url: str
    prompts: list[list[int]]
    output_tokens: int
    start: float = 0.0
    records: list[TokenRecord] = field(default_factory=list)
    sent: int = 0

    def now(self) -> float:
        return time.perf_counter() - self.start

    async def send(self, scheduled_s: float | None = None, burst: int | None = None) -> None:
        prompt = self.prompts[self.sent % len(self.prompts)]
        self.sent += 1
        sent = self.now()
        try:
            stamps, tokens, error = await stream_request(
                self.session, self.url, prompt, self.output_tokens
            )
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            stamps, tokens, error = [], [], f"{type(exc).__name__}: {exc}"
        if not error and len(tokens) != self.output_tokens:
            error = f"{len(tokens)} tokens streamed where {self.output_tokens} were asked"
        times = tuple(s - self.start for s in stamps)
        self.records.append(
            TokenRecord(scheduled_s, sent, times, tuple(tokens), not error, error, burst)
        )


def open_session(spec: LoadSpec) -> aiohttp.ClientSession:
    """Enough connections that no request waits for one inside the client (counted as TTFT)."""
    limit = min(max(spec.concurrency, int(2 * (spec.target_rps or 0)), 64), MAX_CONNECTIONS)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit), timeout=timeout)


async def measure_records(
    endpoint: ServerEndpoint,
    spec: LoadSpec,
    shape: PromptShape,
    vocab: int,
    measure: MeasureSettings,
) -> list[TokenRecord]:
    """Warm up (measure.warmup_runs requests), then the scenario; the records in order."""
    url = f"http://{endpoint.http_url}{STREAM_PATH}"
    async with open_session(spec) as session:
        sender = LlmSender(session, url, prompts_of(vocab, shape, spec.seed), shape.output_tokens)
        sender.start = time.perf_counter()
        for _ in range(measure.warmup_runs):
            await sender.send()
        failed = [r for r in sender.records if not r.ok]
        if sender.records and len(failed) == len(sender.records):
            raise UserError(f"The served LLM failed every warm-up request: {failed[0].error}.")
        sender.records.clear()
        sender.start = time.perf_counter()
        await SCENARIOS[spec.scenario].drive(sender, spec)
        return sender.records


def summarize(
    records: Sequence[TokenRecord],
    spec: LoadSpec,
    shape: PromptShape,
    slo: TokenSlo | None,
    measure: MeasureSettings,
    endpoint: ServerEndpoint,
    serving: str,
) -> LlmLoadPoint:
    """The point: percentiles over the successful requests, rates over their window."""
    good = [r for r in records if r.ok]
    if not good:
        reason = records[0].error if records else "no request was sent"
        raise UserError(f"No request of the {spec.scenario.value} load point succeeded: {reason}.")
    first = min(r.sent_s for r in records)
    window = max(r.done_s for r in good) - first
    rate = len(good) / window if window > 0 else 0.0
    gaps = [gap for r in good for gap in r.itl_ms]
    met = sum(slo.met(r.ttft_ms, r.itl_p99_ms) for r in good) if slo else 0
    verdict = stability([Completed(r.sent_s, r.done_s, r.burst) for r in good], measure)
    errors = [r.error for r in records if not r.ok]
    notes = list(endpoint.notes)
    if errors:
        notes.append(f"{len(errors)} request(s) failed, first: {errors[0]}")
    point = LoadPoint(
        scenario=spec.scenario,
        policy=endpoint.policy,
        spec=spec,
        achieved_rps=rate,
        latency=LatencyStats.from_samples([1000 * (r.done_s - r.sent_s) for r in good]),
        queue_ms=0.0,  # a decoupled model's execute() returns at once: Triton's split is moot
        compute_ms=0.0,
        batch_histogram={},
        stable=verdict.stable,
        stability_note=verdict.note,
        errors=len(errors),
        notes=tuple(notes),
        provider=endpoint.provider,
        runtime_env=endpoint.runtime_env,
        onnxruntime=endpoint.onnxruntime,
    )
    return LlmLoadPoint(
        point=point,
        shape=shape,
        serving=serving,
        ttft=LatencyStats.from_samples([r.ttft_ms for r in good]),
        itl=LatencyStats.from_samples(gaps) if gaps else None,
        output_tokens_per_s=sum(len(r.tokens) for r in good) / window if window > 0 else 0.0,
        slo=slo,
        itl_request_mean=(
            LatencyStats.from_samples([r.itl_mean_ms for r in good]) if gaps else None
        ),
        met_slo=met,
        goodput_rps=(met / window if window > 0 else 0.0) if slo else None,
    )


def run_llm_load(
    endpoint: ServerEndpoint,
    spec: LoadSpec,
    shape: PromptShape,
    vocab: int,
    slo: TokenSlo | None = None,
    measure: MeasureSettings | None = None,
    serving: str = "",
) -> LlmLoadPoint:
    """One load point against a running LLM server (this process; see run_llm_load_in_child)."""
    measure = measure or MEASURE_PRESETS["quick"]
    with HostWatch() as host:
        records = asyncio.run(measure_records(endpoint, spec, shape, vocab, measure))
    point = summarize(records, spec, shape, slo, measure, endpoint, serving)
    if host.share is not None:
        stolen = contention_note({"host_steal_fraction": host.share.steal_fraction})
        if stolen:
            point = replace(point, point=replace(point.point, notes=(*point.point.notes, stolen)))
    return point


def llm_time_limit_s(spec: LoadSpec, measure: MeasureSettings) -> float:
    """How long a child generating the point may run: the duration, the requests still in
    flight when it ends, the warm-up, all generous."""
    return spec.duration_s * 4 + 60 + measure.warmup_runs * 10


def run_llm_load_in_child(
    endpoint: ServerEndpoint,
    spec: LoadSpec,
    shape: PromptShape,
    vocab: int,
    slo: TokenSlo | None = None,
    measure: MeasureSettings | None = None,
    serving: str = "",
) -> LlmLoadPoint:
    """run_llm_load in a child started by the one launcher: the generator's CPU is its own."""
    measure = measure or MEASURE_PRESETS["quick"]
    outcome = run_in_child(
        run_llm_load,
        endpoint,
        spec,
        shape,
        vocab,
        slo,
        measure,
        serving,
        timeout_s=llm_time_limit_s(spec, measure),
        what="The LLM load generator",
    )
    return outcome.value_or_raise("The LLM load generator")


def serve_and_measure_llm(
    folder: Path,
    serving: LlmServing,
    specs: Sequence[LoadSpec],
    shape: PromptShape,
    *,
    slo: TokenSlo | None = None,
    measure: MeasureSettings | None = None,
    on_point: Callable[[LlmLoadPoint], None] | None = None,
    runtime_env: str = DEFAULT,
) -> list[LlmLoadPoint]:
    """Serve the GenAI folder on a real Triton server (onnxruntime-genai on runtime_env's
    onnxruntime), measure each spec from a child process, stop the server; the points in order."""
    facts = folder_facts(folder)
    if shape.prompt_tokens + shape.output_tokens > facts.context_length:
        raise UserError(
            f"{shape.prompt_tokens} prompt tokens plus {shape.output_tokens} output tokens exceed "
            f"the model's context of {facts.context_length}; ask for fewer tokens."
        )
    points = []
    with serve_llm(folder, serving, runtime_env=runtime_env) as server:
        for spec in specs:
            point = run_llm_load_in_child(
                server.endpoint, spec, shape, facts.vocab_size, slo, measure, serving.label
            )
            points.append(point)
            if on_point is not None:
                on_point(point)
    return points
