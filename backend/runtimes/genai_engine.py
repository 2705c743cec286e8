"""ONNX Runtime GenAI's Engine: every sequence one Request, all submitted at once, scheduled by
the library (continuous batching on a PagedAttention model, static batches otherwise).

The Generator takes at most 32 sequences in one batch; the Engine takes any number of Requests.
Each Request's tokens are stamped when the Engine's run() that produced them returns, so every
sequence has its own time to first token and inter-token gaps (TokenTimes.sequence_ns).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.runtimes.base import TokenTimes

if TYPE_CHECKING:  # numpy is imported where tokens are made: the registry reads ENGINE_MODES
    import numpy as np

GENERATOR_MAX_SEQUENCES = 32  # onnxruntime-genai's Generator: "batch_size (33) must be in [1, 32]"
ENGINE_MODES = ("auto", "on", "off")  # auto: the Engine above GENERATOR_MAX_SEQUENCES
# The Engine refuses a session-wide min_length and beam search; exact counts are set per turn.
ENGINE_OVERLAY = {"search": {"min_length": 0, "num_beams": 1}}


def dynamic_batching(folder: Path) -> dict[str, Any] | None:
    """The folder's engine.dynamic_batching section (the builder writes it for PagedAttention
    models, use_paged_attention=true), or None: the Engine then batches statically."""
    config = json.loads((Path(folder) / "genai_config.json").read_text())
    found = (config.get("engine") or {}).get("dynamic_batching")
    return found if isinstance(found, dict) else None


def engine_overlay(folder: Path, sequences: int) -> dict[str, Any]:
    """The config overlay an Engine model opens with: dynamic batching's max batch raised to
    `sequences` where the folder's is lower, so every sequence can run in one step."""
    overlay: dict[str, Any] = json.loads(json.dumps(ENGINE_OVERLAY))
    dynamic = dynamic_batching(folder)
    if dynamic is not None and int(dynamic.get("max_batch_size", 0)) < sequences:
        overlay["engine"] = {"dynamic_batching": {"max_batch_size": sequences}}
    return overlay


def scheduler_words(folder: Path, max_batch: int) -> str:
    """What schedules the Requests, in the words the point's facts carry."""
    if dynamic_batching(folder) is not None:
        return f"continuous batching (dynamic, paged KV cache), max batch {max_batch}"
    return (
        "static batching: this model has no paged KV cache, and onnxruntime-genai's static "
        "scheduler runs at most 4 Requests per batch (a fixed constant), batch after batch"
    )


def engine_generate(og: Any, engine: Any, prompts: np.ndarray, new_tokens: int) -> TokenTimes:
    """Greedy decoding of exactly new_tokens per prompt row, one Request each, all begun before
    the first run(). The clock starts before the Requests are made; a token's time is when the
    run() that returned it came back. token_ns[i] is when token i of every sequence was ready."""
    import numpy as np

    prompts = np.ascontiguousarray(prompts, dtype=np.int32)
    count = prompts.shape[0]
    buffer = engine.create_event_buffer(2 * count + 8)  # one step's events fit in one run()
    clock = time.perf_counter_ns
    start = clock()
    requests = [engine.create_request() for _ in range(count)]
    index = {id(request): i for i, request in enumerate(requests)}
    for request, prompt in zip(requests, prompts, strict=True):
        options = og.TurnOptions(request)
        options.set_do_sample(False)
        options.set_max_generated_tokens(new_tokens)
        options.set_min_generated_tokens(new_tokens)  # EOS masked until then: an exact count
        request.begin_turn(prompt, options)
    tokens: list[list[int]] = [[] for _ in range(count)]
    stamps: list[list[int]] = [[] for _ in range(count)]
    finished: dict[int, str] = {}
    together = 0
    try:
        while engine.has_pending_requests():
            events = engine.run(buffer)
            now = clock() - start
            stepped = set()
            for event in events:
                flags = event.flags
                if flags & og.EngineEventFlags.FAILED:
                    raise RuntimeError(f"the ort-genai Engine failed a request: {event.error_code}")
                i = index[id(event.request)]
                if flags & og.EngineEventFlags.TOKEN:
                    tokens[i].append(int(event.token))
                    stamps[i].append(now)
                    stepped.add(i)
                if flags & og.EngineEventFlags.TURN_FINISHED:
                    finished[i] = event.finish_reason.name
            together = max(together, len(stepped))
    finally:
        for request in requests:
            request.close()
    short = [i for i in range(count) if len(tokens[i]) != new_tokens]
    if short:
        i = short[0]
        raise RuntimeError(
            f"the ort-genai Engine produced {len(tokens[i])} tokens for sequence {i} where "
            f"{new_tokens} were asked (finish reason {finished.get(i, 'none')})"
        )
    merged = [max(stamps[i][t] for i in range(count)) for t in range(new_tokens)]
    return TokenTimes(
        tokens=np.asarray(tokens, dtype=np.int64),
        token_ns=merged,
        sequence_ns=stamps,
        together=together,
    )
