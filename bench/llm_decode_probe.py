"""Standalone decode probe with ONNX Runtime GenAI: TTFT, inter-token latency, tokens/s and the
achieved weight bandwidth as a share of the device's peak, for a check of a GPU host before the
product's own `optiboard generate` runs there (bench/h200_llm.sh runs both).

  python bench/llm_decode_probe.py FOLDER --prompt 1024 --new 128 --batch 1,64 [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def weight_bytes_per_token(folder: Path) -> int:
    """Bytes of initializers a decode step reads: all weights except tables read by a row per
    token (embedding Gather, rotary cos/sin caches)."""
    import onnx

    model = onnx.load(folder / "model.onnx", load_external_data=False)
    consumers: dict[str, set[str]] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, set()).add(node.op_type)
    total = 0
    for tensor in model.graph.initializer:
        if consumers.get(tensor.name) == {"Gather"} or tensor.name in ("cos_cache", "sin_cache"):
            continue
        count = int(np.prod(tensor.dims)) if tensor.dims else 1
        total += count * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    return total


def kv_bytes_per_token(config: dict, positions: int, batch: int) -> int:
    decoder = config["model"]["decoder"]
    per_position = 2 * decoder["num_hidden_layers"] * decoder["num_key_value_heads"]
    return per_position * decoder["head_size"] * 2 * positions * batch  # fp16 cache


def peak_bandwidth() -> tuple[float, str]:
    """The device's peak memory bandwidth from NVML: memory clock x bus width x 2 (DDR)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as error:  # no NVIDIA driver: no peak to compare with
        return float("nan"), f"no NVML ({error})"
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    clock_hz = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM) * 1e6
    bus_bits = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
    name = pynvml.nvmlDeviceGetName(handle)
    return clock_hz * bus_bits / 8 * 2, str(name)


def run(
    folder: Path, prompt: int, new: int, batch: int, repeats: int, graph: bool
) -> dict[str, object]:
    import onnxruntime_genai as og

    config = og.Config(str(folder))
    if graph:  # CUDA graphs replay a decode step's kernels in one launch
        config.clear_providers()
        config.append_provider("cuda")
        config.set_provider_option("cuda", "enable_cuda_graph", "1")
    model = og.Model(config)
    ids = np.random.default_rng(0).integers(100, 30000, (batch, prompt)).astype(np.int32)
    ttfts, itls = [], []
    for _ in range(repeats + 1):  # the first is a warm-up
        params = og.GeneratorParams(model)
        params.set_search_options(
            max_length=prompt + new, min_length=prompt + new, do_sample=False, batch_size=batch
        )
        generator = og.Generator(model, params)
        start = time.perf_counter()
        generator.append_tokens(ids)
        generator.generate_next_token()
        first = time.perf_counter()
        stamps = [first]
        while not generator.is_done():
            generator.generate_next_token()
            stamps.append(time.perf_counter())
        produced = len(generator.get_sequence(0)) - prompt
        assert produced == new, f"{produced} tokens generated where {new} were asked"
        ttfts.append(first - start)
        itls.extend(np.diff(stamps))
        del generator
    ttfts, itls = ttfts[1:], np.array(itls[new - 1 :])
    itl = float(np.median(itls))
    return {
        "batch": batch,
        "cuda_graph": graph,
        "prompt": prompt,
        "new_tokens": new,
        "ttft_ms_p50": 1e3 * float(np.median(ttfts)),
        "itl_ms_p50": 1e3 * itl,
        "itl_ms_p99": 1e3 * float(np.percentile(itls, 99)),
        "tokens_per_s": batch / itl,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--batch", default="1,64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--cuda-graph", action="store_true")
    args = parser.parse_args()
    import onnxruntime_genai as og

    config = json.loads((args.folder / "genai_config.json").read_text())
    weights = weight_bytes_per_token(args.folder)
    peak, device = peak_bandwidth()
    rows = []
    for batch in [int(b) for b in args.batch.split(",")]:
        row = run(args.folder, args.prompt, args.new, batch, args.repeats, args.cuda_graph)
        kv = kv_bytes_per_token(config, args.prompt + args.new // 2, batch)
        achieved = (weights + kv) / (row["itl_ms_p50"] / 1e3)
        row |= {
            "weight_bytes": weights,
            "kv_bytes": kv,
            "achieved_GBps": achieved / 1e9,
            "peak_GBps": peak / 1e9,
            "roofline_share": achieved / peak,
        }
        rows.append(row)
        print(json.dumps(row))
    summary = {
        "device": device,
        "onnxruntime_genai": og.__version__,
        "folder": args.folder.name,
        "rows": rows,
    }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
