"""Where a compiled PyTorch batch-1 decode step's time goes on a GPU, and which inductor settings
shorten it (issue 23's 50% roofline goal), outside the product: the same model, cache and step as
backend/runtimes/genai_torch.py (StaticCache, greedy argmax inside the step, sdpa, fp16), compiled
per mode in a fresh process, then timed two ways over 128 steps after a 1,024-token prefill:
  synced  a stamp per step after torch.cuda.synchronize() (what the product's ITL is)
  gpu     CUDA events around 128 back-to-back steps (the GPU's floor for this step)
and, with --kernels, the step's GPU kernels by name from torch.profiler (CUPTI).

  python3 bench/torch_decode_probe.py FOLDER MODE [--kernels] [--layers model|grouped|runtime]
  MODE: reduce-overhead | cdt (reduce-overhead + coordinate_descent_tuning) |
        max-autotune (+ coordinate_descent_tuning) |
        graph (inductor without its cudagraph trees, + coordinate_descent_tuning, the step
        captured once by hand in one torch.cuda.CUDAGraph over static token/position buffers and
        replayed per token: no per-call input checks or copies of cudagraph trees)
  --layers runtime: the runtime's layer changes (backend/runtimes/torch_layers.py: grouped decode
        attention, q/k/v as one matmul); --layers grouped: only the attention
Run with PYTHONPATH=. (the step is the runtime's own, backend/runtimes/genai_torch.greedy_step).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

PROMPT, NEW = 1024, 128


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("mode", choices=["reduce-overhead", "cdt", "max-autotune", "graph"])
    parser.add_argument("--kernels", action="store_true")
    parser.add_argument("--layers", choices=["model", "grouped", "runtime"], default="model")
    args = parser.parse_args()

    import torch
    import torch._inductor.config as inductor
    from transformers import AutoModelForCausalLM, StaticCache

    from backend.runtimes.genai_torch import greedy_step

    if args.mode in ("cdt", "max-autotune", "graph"):
        inductor.coordinate_descent_tuning = True
    compile_mode = {"max-autotune": "max-autotune", "graph": "default"}.get(
        args.mode, "reduce-overhead"
    )
    model = AutoModelForCausalLM.from_pretrained(
        str(args.folder), dtype=torch.float16, attn_implementation="sdpa"
    ).to("cuda")
    model.eval()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    fused = 0
    if args.layers in ("grouped", "runtime"):
        from backend.runtimes import torch_layers

        torch_layers.register_attention()
        model.set_attn_implementation(torch_layers.GROUPED_DECODE)
        if args.layers == "runtime":
            fused = torch_layers.fuse_projections(model)
    length = PROMPT + NEW
    cache = StaticCache(config=model.config, max_cache_len=length)

    def decode(tokens, position, cache):  # noqa: ANN001, ANN202 - the runtime's own step
        return greedy_step(model, tokens, position, cache)

    compiled = torch.compile(decode, mode=compile_mode, fullgraph=True, dynamic=False)
    step = compiled
    if args.mode == "graph":
        step = _captured(torch, compiled, cache, PROMPT)
    ids = torch.randint(0, model.config.vocab_size, (1, PROMPT), device="cuda")
    positions = [p.clone() for p in torch.arange(PROMPT, length, device="cuda").view(-1, 1)]

    def prefill():  # noqa: ANN202
        cache.reset()
        return _first_token(torch, model, ids, cache)

    prefill.cache = cache  # type: ignore[attr-defined]

    def steps(count: int, sync_each: bool, nxt=None) -> list[float]:  # noqa: ANN001
        nxt, stamps = (prefill() if nxt is None else nxt), []
        torch.cuda.synchronize()
        for i in range(count):
            started = time.perf_counter()
            torch.compiler.cudagraph_mark_step_begin()
            nxt = step(nxt, positions[i].view(1, 1), cache).clone()
            if sync_each:
                torch.cuda.synchronize()
                stamps.append(time.perf_counter() - started)
        torch.cuda.synchronize()
        return stamps

    with torch.inference_mode():
        began = time.perf_counter()
        steps(4, True)  # compile, warm-up, record
        compile_s = time.perf_counter() - began
        synced = []
        for _ in range(3):
            synced += steps(NEW - 1, True)[8:]
        gpu = []
        for _ in range(3):
            prefill()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            nxt = prefill()
            start.record()
            for i in range(NEW - 1):
                torch.compiler.cudagraph_mark_step_begin()
                nxt = step(nxt, positions[i].view(1, 1), cache).clone()
            end.record()
            torch.cuda.synchronize()
            gpu.append(start.elapsed_time(end) / (NEW - 1) * 1000)
        kernels = _kernels(torch, steps, prefill) if args.kernels else {}
        attention = model.config._attn_implementation  # before the check below switches it
        agree, timed = _agreement(torch, step, decode, prefill, positions)
        if args.layers != "model":  # the timed step against the model as transformers loads it
            del step, compiled, cache, prefill.cache  # type: ignore[attr-defined]
            model = None
            torch.cuda.empty_cache()
            plain = _plain_tokens(torch, args.folder, ids, 32)
            same = sum(a == b for a, b in zip(timed, plain, strict=True))
            agree += f" of the changed layers uncompiled; {same}/32 of the model as loaded (sdpa)"
    synced_us = statistics.median(synced) * 1e6
    result = {
        "mode": args.mode,
        "attention": attention,
        "fused_qkv_layers": fused,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "compile_s": round(compile_s, 1),
        "weights_gb": round(weights / 1e9, 3),
        "synced_step_us_p50": round(synced_us, 1),
        "synced_tok_s": round(1e6 / synced_us, 1),
        "gpu_step_us": [round(g, 1) for g in gpu],
        "gpu_tok_s": round(1e6 / min(gpu), 1),
        "hbm_share_synced": round(weights / (synced_us * 1e-6) / 4.8e12, 3),
        "greedy_tokens_equal_eager": agree,
        "kernels_us_per_step": kernels,
    }
    print(json.dumps(result))


def _agreement(torch, step, decode, prefill, positions) -> str:  # noqa: ANN001
    """How many of 32 greedy tokens the timed step gives as the uncompiled step does, from
    the same prefill (the accuracy column behind the speed)."""
    runs = []
    for fn in (step, decode):
        nxt, tokens = prefill(), []
        for i in range(32):
            torch.compiler.cudagraph_mark_step_begin()
            nxt = fn(nxt, positions[i].view(1, 1), prefill.cache).clone()
            tokens.append(int(nxt))
        runs.append(tokens)
    same = sum(a == b for a, b in zip(*runs, strict=True))
    return f"{same}/32", runs[0]


def _plain_tokens(torch, folder, ids, count: int) -> list[int]:  # noqa: ANN001
    """32 greedy decode tokens of the model as transformers loads it (sdpa, its own projections),
    uncompiled, after the same prefill: the reference for a step whose layers were changed."""
    from transformers import AutoModelForCausalLM, StaticCache

    from backend.runtimes.genai_torch import greedy_step

    model = AutoModelForCausalLM.from_pretrained(
        str(folder), dtype=torch.float16, attn_implementation="sdpa"
    ).to("cuda")
    model.eval()
    cache = StaticCache(config=model.config, max_cache_len=PROMPT + NEW)  # as the timed step's
    nxt, tokens = _first_token(torch, model, ids, cache), []
    for i in range(count):
        nxt = greedy_step(model, nxt, torch.tensor([[PROMPT + i]], device="cuda"), cache)
        tokens.append(int(nxt))
    return tokens


def _first_token(torch, model, ids, cache):  # noqa: ANN001, ANN202
    """The prompt's prefill into the cache and its greedy next token."""
    out = model(
        input_ids=ids,
        cache_position=torch.arange(ids.shape[1], device="cuda"),
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    return out.logits[:, -1, :].argmax(dim=-1, keepdim=True)


def _captured(torch, compiled, cache, position: int):  # noqa: ANN001, ANN202
    """The compiled step captured in one CUDA graph over static buffers; calling the result
    copies the token and position in and replays (what the product's loop would do)."""
    token = torch.zeros((1, 1), dtype=torch.long, device="cuda")
    where = torch.full((1, 1), position, dtype=torch.long, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # compile and autotune off the capture
            compiled(token, where, cache)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = compiled(token, where, cache)
    cache.reset()

    def replay(tok, pos, _cache):  # noqa: ANN001, ANN202
        token.copy_(tok)
        where.copy_(pos)
        graph.replay()
        return out

    return replay


def _kernels(torch, steps, prefill) -> dict[str, float]:  # noqa: ANN001
    """GPU time per kernel name over 64 decode steps, per step, largest first (top 25)."""
    from torch.profiler import ProfilerActivity, profile

    first = prefill()  # off the profile: only decode steps are read
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        steps(64, False, first)
    totals: dict[str, float] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            name = event.name[:110]
            totals[name] = totals.get(name, 0.0) + event.device_time_total
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    out = {name: round(us / 64, 1) for name, us in ranked[:25]}
    out["ALL"] = round(sum(totals.values()) / 64, 1)
    return out


if __name__ == "__main__":
    main()
