"""INT4 vs FP32 decode tokens/s at 1 sequence, timed interleaved in one run, with accuracy beside.

Run: .venv/bin/python bench/int4_vs_fp32_decode.py [--hidden 1536 --layers 4 --vocab 16000]

A Llama-shaped model with random weights, big enough that a decode step reads far more bytes
than this CPU's caches hold (memory-bound), is saved as a Hugging Face folder and converted with
onnxruntime-genai's model builder to FP32 and INT4 (`-p int4`: MatMulNBits, RTN, block 32).
Both ONNX Runtime GenAI sessions are open side by side and timed interleaved, window by window
(backend.engine.interleave: the sweep's own windows and stability rule), one generation of
--new-tokens per call; decode tokens/s = 1 / median inter-token latency of the kept windows.
Beside it: the bandwidth roofline (bytes one step reads / ITL against this host's measured copy
bandwidth), greedy agreement INT4 vs FP32 on the prompt, and perplexity: random weights make the
big model's perplexity meaningless, so the trained tiny Llama of the tests (tests/llm_models.py)
is scored too (FP32 and INT4 through the KV cache on its held-out text).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("USE_TF", "0")

from backend.engine.interleave import interleaved  # noqa: E402
from backend.generate.footprint import footprint  # noqa: E402
from backend.generate.perplexity import perplexity, tokens_until_divergence  # noqa: E402
from backend.generate.roofline import cpu_peak, roofline  # noqa: E402
from backend.measure_settings import MeasureSettings  # noqa: E402
from backend.models.hfconvert import BuilderOptions, build_genai_folder  # noqa: E402
from backend.runtimes import open_genai  # noqa: E402
from tests import llm_models  # noqa: E402


def random_llama(folder: Path, hidden: int, layers: int, vocab: int, intermediate: int) -> Path:
    """A random-weight Llama (seeded) with the tests' byte-level BPE tokenizer; cached."""
    if (folder / "config.json").is_file():
        return folder
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    tokenizer = llm_models.train_tokenizer(llm_models.corpus_text(), 512)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 64,
        num_key_value_heads=max(hidden // 256, 1),
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    LlamaForCausalLM(config).eval().save_pretrained(folder, safe_serialization=True)
    fast.save_pretrained(folder)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=1536)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=16000)
    parser.add_argument("--intermediate", type=int, default=4096)
    parser.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    parser.add_argument("--new-tokens", type=int, default=32, help="tokens per timed generation")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="cap per candidate")
    args = parser.parse_args()

    shape = f"h{args.hidden}-l{args.layers}-v{args.vocab}-i{args.intermediate}"
    work = Path(tempfile.gettempdir()) / "optiboard-bench-int4" / shape
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    hf = random_llama(work / "hf", args.hidden, args.layers, args.vocab, args.intermediate)
    folders = {}
    for precision in ("fp32", "int4"):  # the product's builder path, in the sandboxed child
        folders[precision] = work / f"genai-{precision}"
        if not (folders[precision] / "genai_config.json").is_file():
            build_genai_folder(hf, folders[precision], BuilderOptions(precision=precision))
    print(f"model: random-weight Llama {shape} ({time.perf_counter() - started:.0f} s to build)")
    peak = cpu_peak()
    print(f"peak: {peak.source}; cpu: {peak.device}; {os.cpu_count()} cores")

    sessions = {p: open_genai("ort-genai", f) for p, f in folders.items()}
    print("ran:", json.dumps(sessions["fp32"].facts["versions"]), "providers cpu")
    prompt = np.random.default_rng(0).integers(3, 512, size=(1, args.prompt))
    itl: dict[str, list[float]] = {p: [] for p in sessions}
    ttft: dict[str, list[float]] = {p: [] for p in sessions}
    first_tokens = {p: s.generate(prompt, args.new_tokens).tokens for p, s in sessions.items()}

    def candidate(name: str):
        def once() -> None:
            run = sessions[name].generate(prompt, args.new_tokens)
            itl[name].extend(run.itl_ms)
            ttft[name].append(run.ttft_ms)

        return once

    settings = MeasureSettings(
        warmup_runs=1,
        window_runs=2,
        window_min_seconds=0.0,
        stable_windows=3,
        stability_tolerance=0.10,
        max_seconds=args.max_seconds,
    )
    timed = interleaved({p: candidate(p) for p in sessions}, settings)
    rates = {}
    for name in sessions:
        f = footprint(folders[name])
        keep = itl[name][-settings.stable_windows * 2 * (args.new_tokens - 1) :]
        itl_ms = float(np.median(keep))
        rates[name] = 1e3 / itl_ms
        roof = roofline(f.bytes_per_step(args.prompt + args.new_tokens / 2, 1), itl_ms, peak)
        print(
            f"{name}: {f.precision}, weights {f.weight_bytes / 2**20:.0f} MiB; "
            f"ITL p50 {itl_ms:.2f} ms -> decode {rates[name]:.1f} tokens/s; "
            f"TTFT p50 {np.median(ttft[name]):.1f} ms; generation p50 "
            f"{timed.timed[name].p50_ms:.0f} ms; {roof.achieved_bytes_s / 1e9:.2f} GB/s = "
            f"{roof.fraction:.0%} of the measured copy bandwidth"
        )
    print(f"INT4/FP32 decode tokens/s at 1 sequence: {rates['int4'] / rates['fp32']:.2f}x")
    print(timed.verdict())
    agree = tokens_until_divergence(first_tokens["int4"], first_tokens["fp32"])[0]
    print(f"greedy agreement INT4 vs FP32 (random weights): {agree}/{args.new_tokens} tokens")
    for session in sessions.values():
        session.close()

    trained = llm_models.trained_llama(llm_models.TINY)
    scores = {}
    for precision in ("fp32", "int4"):
        folder = llm_models.built_genai_folder(llm_models.TINY, precision)
        with open_genai("ort-genai", folder) as session:
            ids = session.encode(trained.eval_text)
            scores[precision] = perplexity(session, ids, window=128, chunk=16, max_tokens=1024)
    loss = scores["int4"].perplexity / scores["fp32"].perplexity - 1
    print(
        f"trained tiny Llama, held-out text ({scores['fp32'].tokens} tokens, windows of 128, "
        f"16 per step through the KV cache): perplexity FP32 {scores['fp32'].perplexity:.3f}, "
        f"INT4 {scores['int4'].perplexity:.3f} ({loss:+.2%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
