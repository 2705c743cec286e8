"""A Llama-3.2-1B-shaped Hugging Face folder with random fp16 weights, written on the device
(no network, and 2.47 GB is far over one device call's payload) for the torch runtime:
config.json from bench/llm_shape.py's LLAMA_32_1B, model.safetensors (tied embeddings, stored
once), and llm_shape's small byte-level tokenizer (the benchmark feeds token ids).

  python3 bench/torch_hf_shape.py OUT_FOLDER [--layers N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_shape import LLAMA_32_1B, _tokenizer  # noqa: E402


def build(out: Path, layers: int | None) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if (out / "model.safetensors").is_file():
        print(f"{out} exists")
        return
    config = LlamaConfig(**dict(LLAMA_32_1B, **({"num_hidden_layers": layers} if layers else {})))
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):  # random init on the GPU: seconds, not a minute on the host
        model = LlamaForCausalLM(config).to(torch.float16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    _tokenizer(out)
    size = sum(p.stat().st_size for p in out.glob("*.safetensors"))
    print(f"{out}: {size / 1e9:.2f} GB of fp16 safetensors, {config.num_hidden_layers} layers")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int)
    args = parser.parse_args()
    build(args.out, args.layers)
