"""Where a decode step's time goes on a GPU host: the GPU kernels of one generated token, read by
CUPTI through torch.profiler, for the product's own ONNX Runtime GenAI session
(backend.runtimes.genai_ort, the settings `optiboard generate --device cuda` uses).

Per kernel name: calls and GPU time per decode step, from two profiled generations of the same
prompt that differ only in the number of new tokens (the difference is decode alone). Then the
step's wall time (host clock), the GPU-busy time (sum of kernel times), the GEMM kernels' time
and the bandwidth they reach on the step's weight bytes.

  python bench/llm_kernels.py FOLDER [--prompt 1024] [--new 64] [--cuda-graph] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

GROUPS = (  # first match wins, on the lower-cased kernel name
    ("gemm (weights)", ("gemm", "gemv", "cutlass", "xmma", "matmul", "splitkreduce")),
    ("attention", ("attention", "flash", "fmha", "softmax", "rotary", "concatnewtopast")),
    ("norm", ("layernorm", "rmsnorm", "skiplayernorm", "layer_norm")),
    ("search/sampling", ("argmax", "topk", "top_k", "search", "greedy", "reduce")),
    ("copy/cast", ("copy", "memcpy", "memset", "cast", "transpose", "fill", "concat")),
    ("elementwise", ("elementwise", "binary", "unary", "silu", "sigmoid", "mul", "add")),
)


def _kernels(prof: object) -> dict[str, tuple[int, float]]:
    table: dict[str, tuple[int, float]] = {}
    for event in prof.key_averages():  # type: ignore[attr-defined]
        total = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if total:
            table[event.key] = (event.count, float(total))
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--cuda-graph", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch  # first: its CUDA libraries and CUPTI are the ones loaded
    from llm_decode_probe import weight_bytes_per_token
    from torch.profiler import ProfilerActivity, profile

    from backend.runtimes.genai_ort import OrtGenAISession

    torch.cuda.init()
    session = OrtGenAISession(args.folder, "cuda", cuda_graph=args.cuda_graph)
    rng = np.random.default_rng(0)
    vocab = json.loads((args.folder / "genai_config.json").read_text())["model"]["vocab_size"]
    prompt = rng.integers(100, vocab - 100, size=(1, args.prompt), dtype=np.int32)
    for _ in range(2):
        session.generate(prompt, args.new + 1)  # warm-up (graph capture on the first decode)
    tables = {}
    walls = {}
    for new in (1, args.new + 1):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            times = session.generate(prompt, new)
        torch.cuda.synchronize()
        tables[new] = _kernels(prof)
        walls[new] = times.token_ns
    steps = args.new
    decode: list[dict] = []
    for name, (count, total) in tables[args.new + 1].items():
        base_count, base_total = tables[1].get(name, (0, 0.0))
        calls, us = (count - base_count) / steps, (total - base_total) / steps
        if us <= 0 and calls <= 0:
            continue
        lower = name.lower()
        group = next((g for g, keys in GROUPS if any(k in lower for k in keys)), "other")
        decode.append({"name": name, "group": group, "calls_per_step": calls, "us_per_step": us})
    decode.sort(key=lambda k: -k["us_per_step"])
    gaps = np.diff(np.asarray(walls[args.new + 1], dtype=np.float64)) / 1e3  # us per step
    groups: dict[str, dict[str, float]] = {}
    for kernel in decode:
        entry = groups.setdefault(kernel["group"], {"us": 0.0, "calls": 0.0})
        entry["us"] += kernel["us_per_step"]
        entry["calls"] += kernel["calls_per_step"]
    busy_us = sum(k["us_per_step"] for k in decode)
    weight_bytes = weight_bytes_per_token(args.folder)
    gemm_us = groups.get("gemm (weights)", {}).get("us", 0.0)
    report = {
        "folder": args.folder.name,
        "cuda_graph": args.cuda_graph,
        "prompt": args.prompt,
        "decode_steps": steps,
        "step_wall_us_p50": float(np.median(gaps)),
        "gpu_busy_us_per_step": busy_us,
        "gpu_idle_us_per_step": float(np.median(gaps)) - busy_us,
        "kernels_per_step": sum(k["calls_per_step"] for k in decode),
        "weight_bytes_per_step": weight_bytes,
        "gemm_bandwidth_gb_s": weight_bytes / gemm_us / 1e3 if gemm_us else None,
        "groups": {
            g: {"us": round(v["us"], 1), "calls": round(v["calls"], 1)}
            for g, v in sorted(groups.items(), key=lambda kv: -kv[1]["us"])
        },
        "top_kernels": decode[:30],
        "versions": {"torch": torch.__version__, **session.facts["versions"]},
        "device": torch.cuda.get_device_name(0),
    }
    print(json.dumps({k: v for k, v in report.items() if k != "top_kernels"}, indent=1))
    for k in decode[:25]:
        print(
            f"  {k['us_per_step']:8.1f} us x{k['calls_per_step']:<6.1f} {k['group']:<16} "
            f"{k['name'][:100]}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
