"""A Llama-3.2-1B-shaped ONNX Runtime GenAI model with random weights, for hosts without network.

The 1B shape's FP16 weights are 2.47 GB, far more than one device call may carry (64 MiB). So the
graph is built here with onnxruntime-genai's model builder from a randomly initialised transformers
model (`build`), its external weight file is dropped (`strip`, leaving a few MB of graph, config
and tokenizer), and the weights are written again on the device with seeded random values of the
same dtype, shape and file offsets (`fill`). The runtime reads the same graph and the same number
of weight bytes per token as with the real checkpoint; only the values (and so the text) differ.

  python bench/llm_shape.py build OUT [--precisions fp16,int4] [--execution cuda] [--layers N]
                                       [--paged]  (PagedAttention: the Engine batches continuously)
  python bench/llm_shape.py fill FOLDER        (on the device, before running the benchmark)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

# meta-llama/Llama-3.2-1B's config.json, less the weights (tied embeddings, GQA 32/8, RoPE llama3).
LLAMA_32_1B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "attention_bias": False,
    "mlp_bias": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "float16",
}
MANIFEST = "random_weights.json"


def _tokenizer(folder: Path) -> None:
    """A small byte-level BPE tokenizer: the builder reads one for the special token ids; the
    benchmark feeds token ids, so the model's 128,256-entry vocabulary need not match it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<pad>", "<s>", "</s>", "<unk>"])
    text = Path(np.__file__).with_name("__init__.py").read_text()
    tokenizer.train_from_iterator(text.splitlines(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
    )
    fast.save_pretrained(folder)


def build(
    out: Path, precisions: list[str], execution: str, layers: int | None, paged: bool = False
) -> None:
    """paged: PagedAttention (CUDA FP16/BF16 only), whose genai_config asks onnxruntime-genai's
    Engine for dynamic (continuous) batching; its folders end in -paged."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = dict(LLAMA_32_1B, **({"num_hidden_layers": layers} if layers else {}))
    with tempfile.TemporaryDirectory() as scratch:
        hf = Path(scratch) / "hf"
        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(**config)).to(torch.float16)
        model.save_pretrained(hf, safe_serialization=True)
        del model
        _tokenizer(hf)
        for precision in precisions:
            target = out / f"llama-3.2-1b-shape-{precision}-{execution}{'-paged' if paged else ''}"
            extra = ["--extra_options", "use_paged_attention=true"] if paged else []
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "onnxruntime_genai.models.builder",
                    "-i",
                    str(hf),
                    "-o",
                    str(target),
                    "-p",
                    precision,
                    "-e",
                    execution,
                    "-c",
                    str(Path(scratch) / "cache"),
                    *extra,
                ],
                check=True,
            )
            strip(target)


def _external(model_file: Path) -> list[dict[str, object]]:
    import onnx

    model = onnx.load(model_file, load_external_data=False)
    entries = []
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in tensor.external_data}
        entries.append(
            {
                "name": tensor.name,
                "dtype": onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).str,
                "location": info["location"],
                "offset": int(info.get("offset", 0)),
                "length": int(info["length"]),
            }
        )
    return entries


def strip(folder: Path) -> None:
    """Drop the external weight files, keeping where each tensor lies in them."""
    entries = []
    for model_file in sorted(folder.glob("*.onnx")):
        entries += [dict(e, model=model_file.name) for e in _external(model_file)]
    for location in {str(e["location"]) for e in entries}:
        (folder / location).unlink()
    (folder / MANIFEST).write_text(json.dumps(entries))


def fill(folder: Path, seed: int = 0) -> int:
    """Write every stripped tensor again with seeded random values; returns the bytes written.
    Norm weights are 1 and float weights ~N(0, 0.02), as transformers initialises them; int4/int8
    packed weights and zero points are random bytes and their scales small: no value overflows."""
    rng = np.random.default_rng(seed)
    entries = json.loads((folder / MANIFEST).read_text())
    written = 0
    for location in {e["location"] for e in entries}:
        path = folder / location
        with path.open("wb") as out:
            for entry in sorted(
                (e for e in entries if e["location"] == location), key=lambda e: e["offset"]
            ):
                dtype = np.dtype(entry["dtype"])
                count = entry["length"] // dtype.itemsize
                name = entry["name"].lower()
                if dtype.kind in "iu":
                    values = rng.integers(0, 256, entry["length"], dtype=np.uint8)
                elif "layernorm" in name or "norm" in name:
                    values = np.ones(count, dtype=dtype)
                elif "scales" in name:
                    values = np.full(count, 0.002, dtype=dtype)
                else:
                    values = (rng.standard_normal(count, dtype=np.float32) * 0.02).astype(dtype)
                out.seek(entry["offset"])
                out.write(values.tobytes())
                written += entry["length"]
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    b = verbs.add_parser("build")
    b.add_argument("out", type=Path)
    b.add_argument("--precisions", default="fp16,int4")
    b.add_argument("--execution", default="cuda")
    b.add_argument("--layers", type=int, default=None)
    b.add_argument("--paged", action="store_true", help="PagedAttention (Engine batching)")
    f = verbs.add_parser("fill")
    f.add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.verb == "build":
        args.out.mkdir(parents=True, exist_ok=True)
        build(args.out, args.precisions.split(","), args.execution, args.layers, args.paged)
    else:
        print(f"{fill(args.folder) / 1e9:.2f} GB of random weights written in {args.folder}")


if __name__ == "__main__":
    main()
