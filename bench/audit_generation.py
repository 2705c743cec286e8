"""Product vs independent figures for a generation benchmark, side by side.

Run: .venv/bin/python bench/audit_generation.py REPORT --hf HF_FOLDER --text TEXT
         --folder KEY=FOLDER [--folder KEY=FOLDER ...] [--csv EXPORT.csv]

REPORT is `optiboard generate ... --json` (points keyed by runtime, e.g. `ort-genai`) or
`optiboard export JOB --format json` (keyed `variant|runtime`, e.g. `int4|openvino-genai`);
each --folder names the folder that point ran (a GenAI folder, an OpenVINO IR folder or the
Hugging Face folder). Nothing of backend/generate is imported: every figure is computed again
from the files, the config, the point's own timings and the runtimes' plain APIs:

- weights: every tensor of the files (ONNX initializers with their external data, OpenVINO IR
  constants, safetensors tensors); KV cache: 2 x layers x KV heads x head dim x (prompt + new)
  x sequences x the item size the runtime states it keeps (fp32 4, bf16/fp16 2, u8 1);
- bytes a decode step reads: weights less the embedding table (its real bytes, scales and zero
  points included) and rotary caches, plus one embedding row per sequence, plus the KV cache at
  the mean context prompt + (new - 1) / 2; float weights computed in bf16 count 2 bytes each;
- output tokens/s = sequences x new / e2e p50, decode tokens/s = sequences / ITL p50,
  of peak = bytes per step / ITL p50 / the stated peak;
- perplexity: one full forward pass per window (no KV cache) over the first N tokens of the text
  as the Hugging Face tokenizer encodes it (transformers for the HF folder, onnxruntime's plain
  InferenceSession for a GenAI folder, OpenVINO's compiled IR for an IR folder);
- greedy agreement: each folder's and the HF folder's greedy tokens by full recompute (argmax of
  the last position, no KV cache) on the prompts the product documents (slices of the text's
  tokens), tokens until the first difference; for an OpenVINO folder also LLMPipeline's own
  greedy tokens with the plugin's defaults (its u8 KV cache), which is what the product runs;
- the export CSV (--csv) and `show`'s table (--show) against the JSON export, figure by figure.
The MB of the product is 2**20 bytes (docs/measurement.md).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("USE_TF", "0")
MB = 2**20
HEAD_DIM = [0]  # from the HF config.json, set in main
ITEM = {"fp32": 4, "bf16": 2, "fp16": 2, "u8": 1, "i8": 1}


class Model:
    """One folder opened by the runtime's plain API: logits of a whole token sequence."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        if (folder / "openvino_model.xml").is_file():
            import openvino as ov

            self.kind = "openvino"
            self.ir = ov.Core().read_model(str(folder / "openvino_model.xml"))
            self.request = ov.Core().compile_model(self.ir, "CPU").create_infer_request()
        elif (folder / "genai_config.json").is_file():
            import onnxruntime as ort

            self.kind = "onnx"
            self.session = ort.InferenceSession(
                str(folder / "model.onnx"), providers=["CPUExecutionProvider"]
            )
        else:
            import torch
            from transformers import AutoModelForCausalLM

            self.kind = "hf"
            self.torch = torch
            self.model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
            self.model.eval()

    def logits(self, ids: np.ndarray) -> np.ndarray:
        """[tokens, vocab] for one sequence, from scratch."""
        ids = np.asarray(ids, dtype=np.int64).reshape(1, -1)
        if self.kind == "hf":
            with self.torch.no_grad():
                return self.model(self.torch.from_numpy(ids)).logits[0].double().numpy()
        if self.kind == "onnx":
            feeds: dict[str, np.ndarray] = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            for i in self.session.get_inputs():
                if i.name.startswith("past_key_values"):
                    shape = (1, i.shape[1], 0, HEAD_DIM[0])
                    feeds[i.name] = np.zeros(shape, dtype=np.float32)
            return self.session.run(["logits"], feeds)[0][0].astype(np.float64)
        self.request.reset_state()
        self.request.infer(
            {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "position_ids": np.arange(ids.shape[1], dtype=np.int64)[None, :],
                "beam_idx": np.zeros(1, dtype=np.int32),
            }
        )
        return np.array(self.request.get_tensor("logits").data, dtype=np.float64)[0]

    def pipeline_greedy(self, prompts: np.ndarray, new: int) -> list[list[int]]:
        """OpenVINO GenAI's LLMPipeline with the plugin's defaults (its u8 KV cache included),
        all prompts as one batch: what the product's openvino-genai points decode."""
        import openvino as ov
        import openvino_genai

        pipe = openvino_genai.LLMPipeline(str(self.folder), "CPU")
        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = config.min_new_tokens = new
        config.ignore_eos, config.do_sample = True, False
        ids = np.ascontiguousarray(prompts, dtype=np.int64)
        out = pipe.generate(
            openvino_genai.TokenizedInputs(ov.Tensor(ids), ov.Tensor(ids * 0 + 1)), config
        )
        return np.asarray(out.tokens).reshape(len(ids), -1)[:, -new:].tolist()

    def greedy(self, prompt: np.ndarray, new: int) -> list[int]:
        ids = list(prompt)
        for _ in range(new):
            ids.append(int(np.argmax(self.logits(np.asarray(ids))[-1])))
        return ids[len(prompt) :]


def weight_bytes(folder: Path) -> tuple[int, int, int]:
    """(every tensor's bytes, the lookup tables' bytes, an embedding row's bytes), from files."""
    if (folder / "openvino_model.xml").is_file():
        import openvino as ov

        consts = [
            op
            for op in ov.Core().read_model(str(folder / "openvino_model.xml")).get_ordered_ops()
            if op.get_type_name() == "Constant"
        ]
        total = sum(int(op.get_byte_size()) for op in consts)
        # the table and its scale and zero point where compressed
        table = [op for op in consts if "embed_tokens.weight" in op.get_friendly_name()]
        lookup = sum(int(op.get_byte_size()) for op in table)
        rows = max(list(op.get_output_shape(0))[0] for op in table)
        return total, lookup, lookup // rows
    if (folder / "genai_config.json").is_file():
        import onnx

        graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
        stored = {t.name: _stored_bytes(t) for t in graph.initializer}  # what the files hold
        rows = {t.name: int(t.dims[0]) for t in graph.initializer if t.dims}
        gathered = {n.input[0] for n in graph.node if n.op_type == "Gather"} & stored.keys()
        rotary = {name for name in stored if "cos_cache" in name or "sin_cache" in name}
        table = max(gathered, key=lambda n: stored[n])
        lookup = sum(stored[n] for n in gathered | rotary)
        return sum(stored.values()), lookup, stored[table] // rows[table]
    from safetensors.numpy import load_file

    tensors = {}
    for path in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(str(path)))
    table = next(n for n in tensors if n.endswith("embed_tokens.weight"))
    untied = any(n.endswith("lm_head.weight") for n in tensors)
    row = tensors[table][0].nbytes if untied else 0
    lookup = tensors[table].nbytes if untied else 0
    return sum(t.nbytes for t in tensors.values()), lookup, row


def _stored_bytes(tensor: Any) -> int:
    """An initializer's bytes as stored: its external data's length, else its raw or typed data."""
    found = {e.key: e.value for e in tensor.external_data}
    if "length" in found:
        return int(found["length"])
    if tensor.raw_data:
        return len(tensor.raw_data)
    from onnx import numpy_helper

    return int(numpy_helper.to_array(tensor).nbytes)


def perplexity(model: Model, ids: list[int], window: int, tokens: int) -> float:
    """exp(mean NLL) over independent windows, each one full forward pass."""
    used = np.asarray(ids[:tokens], dtype=np.int64)
    nll = []
    for start in range(0, len(used), window):
        seg = used[start : start + window]
        if len(seg) < 2:
            break
        scores = model.logits(seg)[:-1]
        top = scores.max(axis=1, keepdims=True)
        norm = np.log(np.exp(scores - top).sum(axis=1)) + top[:, 0]
        nll.append(norm - scores[np.arange(len(seg) - 1), seg[1:]])
    return math.exp(float(np.concatenate(nll).mean()))


def prompts(ids: list[int], prompt: int, sequences: int) -> np.ndarray:
    """The documented prompts: slices of the text's tokens, evenly spaced."""
    step = max((len(ids) - prompt) // sequences, 1)
    return np.stack([np.asarray(ids[i * step : i * step + prompt]) for i in range(sequences)])


def until_divergence(ours: list[int], theirs: list[int]) -> int:
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    return differ[0] if differ else len(ours)


def read_points(path: Path) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """(key, point) of a `generate --json` report or a job's `export --format json`, and the
    perplexity per key."""
    data = json.loads(path.read_text())
    if isinstance(data, dict):  # generate --json
        points = [(r["runtime"], r) for r in data["results"] if r["status"] == "ok"]
        return points, {k: v["perplexity"] for k, v in data["perplexity"].items()}
    points = [(f"{p['variant']}|{p['runtime']}", p) for p in data if p["status"] != "failed"]
    return points, {k: (p.get("perplexity") or {}).get("perplexity") for k, p in points}


def point_rows(key: str, p: dict[str, Any], files: tuple[int, int, int], config: dict) -> list:
    """(figure, product, independent) of one point's bytes and rates."""
    total, lookup, row = files
    facts = p.get("facts") or {}
    kv_item = ITEM.get(facts.get("kv_cache_precision", "fp32"), 4)
    layers, kv_heads = config["num_hidden_layers"], config["num_key_value_heads"]
    per_token = 2 * layers * kv_heads * HEAD_DIM[0] * kv_item
    prompt, new, seqs = p["prompt_tokens"], p["new_tokens"], p["sequences"]
    float_weights = not p["precision"].startswith("int")
    scale = 0.5 if facts.get("inference_precision") == "bf16" and float_weights else 1.0
    step = (total - lookup + row * seqs) * scale + per_token * (prompt + (new - 1) / 2) * seqs
    roof = p["roofline"]
    itl_s = p["itl_p50_ms"] / 1e3
    return [
        ("weights MB", p["weights_mb"], total / MB),
        ("KV MB", p["kv_cache_mb"], per_token * (prompt + new) * seqs / MB),
        ("bytes/step", roof["bytes_per_step"], step),
        ("out tok/s", p["output_tokens_per_s"], seqs * new / (p["e2e_p50_ms"] / 1e3)),
        ("decode tok/s", p["decode_tokens_per_s"], seqs / itl_s),
        ("GB/s", roof["achieved_bytes_s"] / 1e9, step / itl_s / 1e9),
        ("of peak", roof["fraction"], step / itl_s / roof["peak"]["bytes_per_s"]),
    ]


def show(key: str, rows: list) -> None:
    for figure, product, ours in rows:
        if product is None or ours is None:
            print(f"  {key:28} {figure:14} product {product!s:>14}  independent {ours!s:>14}")
            continue
        rel = abs(product - ours) / abs(ours) if ours else abs(product)
        flag = "" if rel < 2e-3 else "   <-- differs"
        print(
            f"  {key:28} {figure:14} product {product:14.6g}  independent {ours:14.6g}"
            f"  rel {rel:.1e}{flag}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--hf", type=Path, required=True)
    parser.add_argument("--text", type=Path, required=True)
    parser.add_argument("--folder", action="append", default=[], help="KEY=FOLDER")
    parser.add_argument("--csv", type=Path, help="the job's `export` CSV, checked against JSON")
    parser.add_argument("--show", type=Path, help="`optiboard show JOB`'s output, checked too")
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=1024)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    config = json.loads((args.hf / "config.json").read_text())
    config.setdefault("num_key_value_heads", config["num_attention_heads"])
    HEAD_DIM[0] = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    ids = AutoTokenizer.from_pretrained(str(args.hf))(
        args.text.read_text(), add_special_tokens=False
    )["input_ids"]
    folders = dict(item.split("=", 1) for item in args.folder)
    points, ppl = read_points(args.report)
    reference = Model(args.hf)
    models = {key: Model(Path(f)) for key, f in folders.items()}
    print(f"text: {len(ids)} tokens; windows of {args.window} over the first {args.tokens}")
    own = perplexity(reference, ids, args.window, args.tokens)
    print(f"  {'HF fp32 (transformers)':28} perplexity {own:.6f}")
    for key, model in models.items():
        print(
            f"  {key:28} perplexity product {ppl.get(key)!s:>20}  independent "
            f"{perplexity(model, ids, args.window, args.tokens):.6f}"
        )
    for key, p in points:
        if key not in models:
            print(f"  {key:28} (no --folder given: skipped)")
            continue
        show(key, point_rows(key, p, weight_bytes(models[key].folder), config))
        agree(key, p, models[key], reference, ids)
    if args.csv:
        check_csv(args.csv, points)
    if args.show:
        check_show(args.show, points)


def agree(key: str, p: dict[str, Any], model: Model, reference: Model, ids: list[int]) -> None:
    """Greedy tokens by full recompute, against the HF fp32 folder's and the product's own."""
    found, against_product = [], []
    stored = p.get("tokens") or []
    for i, prompt in enumerate(prompts(ids, p["prompt_tokens"], p["sequences"])):
        ours = model.greedy(prompt, p["new_tokens"])
        found.append(until_divergence(ours, reference.greedy(prompt, p["new_tokens"])))
        if i < len(stored):
            against_product.append(until_divergence(ours, stored[i]))
    line = f"  {key:28} agreement product {p.get('agreement')}  full recompute vs HF fp32 {found}"
    if model.kind == "openvino":
        asked = prompts(ids, p["prompt_tokens"], p["sequences"])
        theirs = [reference.greedy(prompt, p["new_tokens"]) for prompt in asked]
        piped = model.pipeline_greedy(asked, p["new_tokens"])
        counts = [until_divergence(a, b) for a, b in zip(piped, theirs, strict=True)]
        line += f"  LLMPipeline vs HF fp32 {counts}"
    if stored:
        line += f"  (our tokens vs the product's own run: {against_product})"
    print(line)


def check_csv(path: Path, points: list[tuple[str, dict[str, Any]]]) -> None:
    """Every figure of the export CSV against the stored point it came from."""
    by_key = {
        f"{p['variant']}|{p['runtime']}|{p['prompt_tokens']},{p['new_tokens']},{p['sequences']}": p
        for _, p in points
    }
    names = (
        "ttft_p50_ms",
        "ttft_p99_ms",
        "itl_p50_ms",
        "itl_p99_ms",
        "e2e_p50_ms",
        "output_tokens_per_s",
        "decode_tokens_per_s",
        "weights_mb",
        "kv_cache_mb",
    )
    worst = 0.0
    with path.open() as handle:
        for row in csv.DictReader(handle):
            p = by_key.get(row["key"])
            if p is None or row["status"] == "failed":
                continue
            for name in names:
                worst = max(worst, abs(float(row[name]) - p[name]) / max(abs(p[name]), 1e-12))
            frac = (  # no share of peak where the step's bytes sat in cache
                0.0
                if p["roofline"].get("in_cache")
                else abs(float(row["bandwidth_fraction"]) - p["roofline"]["fraction"])
            )
            gbs = abs(float(row["bandwidth_gb_s"]) - p["roofline"]["achieved_bytes_s"] / 1e9)
            worst = max(worst, frac, gbs)
    print(f"CSV against the JSON export: largest relative difference {worst:.1e}")


def show_cells(p: dict[str, Any]) -> dict[str, str]:
    """The table cells a stored point should print as, formatted here from its JSON."""
    roof = p["roofline"]
    peak = "in cache" if roof.get("in_cache") else f"{roof['fraction']:.0%}"
    return {
        "TTFT p50/p99 ms": f"{p['ttft_p50_ms']:.2f}/{p['ttft_p99_ms']:.2f}",
        "ITL p50/p99 ms": f"{p['itl_p50_ms']:.3f}/{p['itl_p99_ms']:.3f}",
        "out tok/s": f"{p['output_tokens_per_s']:.1f}",
        "decode tok/s": f"{p['decode_tokens_per_s']:.1f}",
        "e2e ms": f"{p['e2e_p50_ms']:.1f}",
        "weights MB": f"{p['weights_mb']:.1f}",
        "KV MB": f"{p['kv_cache_mb']:.2f}",
        "GB/s": f"{roof['achieved_bytes_s'] / 1e9:.2f}",
        "of peak": peak,
    }


def check_show(path: Path, points: list[tuple[str, dict[str, Any]]]) -> None:
    """Each row of `show`'s table against its stored point, cell by cell."""
    import re

    lines = path.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("variant "))
    names = re.split(r"\s{2,}", lines[header].strip())
    by_key = {(p["variant"], p["runtime"], str(p["sequences"])): p for _, p in points}
    differ = 0
    for line in lines[header + 2 :]:
        cells = dict(zip(names, re.split(r"\s{2,}", line.strip()), strict=False))
        p = by_key.get((cells.get("variant"), cells.get("runtime"), cells.get("seqs")))
        if p is None or len(cells) < len(names) - 1:
            break
        for name, want in show_cells(p).items():
            if cells.get(name) != want:
                differ += 1
                print(f"  show {p['key']}: {name} prints {cells.get(name)!r}, its JSON {want!r}")
    print(f"show's table against the JSON export: {differ} cells differ")


if __name__ == "__main__":
    main()
