"""transformers + PyTorch on a Hugging Face folder: greedy decoding over a static KV cache in our
own loop (prefill once, then one token per step), optionally with the decode step compiled by
torch.compile (inductor fuses the small norm/rotary/activation kernels into a few Triton kernels,
its tile sizes tuned by coordinate descent) and captured here in one CUDA graph per shape, replayed
per token from static token and position buffers. Against cudagraph trees ("reduce-overhead", which
check and copy every input on each call) on an H100, Llama-3.2-1B shape, batch 1: 1.69 ms a synced
step instead of 2.10 (host time 22 us instead of 270, GPU 1.67 ms instead of 1.84), the greedy
tokens equal to the uncompiled step's (bench/results/h100_torch_graph.txt).

Only config.json + *.safetensors are read (hfcheck refuses pickled weights), fp32 on CPU and fp16
on CUDA, attention through sdpa except a grouped-query model's one-token decode step, which reads
each key/value head of the cache once for its group of query heads (grouped_decode_attention).
A compiled decode step is compiled and captured for each (sequences, cache length) shape in an
untimed warm-up inside the first generate() of that shape, before the clock starts, so no timed
window holds a compilation; its seconds are a point fact.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from backend.errors import UnavailableError, UserError
from backend.runtimes.base import GenAISession, TokenTimes, return_freed_memory

WARMUP_STEPS = 3  # compile and autotune, on a side stream, before the step is captured
COMPILED = "torch.compile(fullgraph=True, coordinate descent tuning), one CUDA graph per shape"


def inductor_cache() -> str:
    """Where inductor and triton write their caches: TORCHINDUCTOR_CACHE_DIR when set, else a
    folder under the temporary directory, which the sandbox mounts writable (a private tmpfs)."""
    path = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or str(
        Path(tempfile.gettempdir()) / "optiboard-inductor"
    )
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(path) / "triton"))
    return path


def greedy_step(model: Any, tokens: Any, position: Any, cache: Any) -> Any:
    """One decode step of `model` over `cache`: the next greedy token of every sequence (argmax
    inside, so a compiled step hands back one small tensor)."""
    out = model(
        input_ids=tokens,
        position_ids=position.expand(tokens.shape[0], 1),
        cache_position=position[0],
        past_key_values=cache,
        use_cache=True,
    )
    return out.logits[:, -1, :].argmax(dim=-1, keepdim=True)


class TorchGenAISession(GenAISession):
    name = "torch"

    def __init__(
        self, folder: Path, device: str, compile: bool = False, reference: bool = False
    ) -> None:
        """reference: the model as transformers loads it, in fp32 on any device, uncompiled and
        without the decode step's layer changes: what greedy agreement compares with."""
        super().__init__(folder, device)
        from backend.hfcheck import check_hf_folder

        checked = check_hf_folder(self.folder, self.folder.name)  # safetensors only, no pickle
        if device == "cpu" and compile:
            raise UserError(
                "--torch-compile runs on CUDA only here (inductor's C++ compile on CPU took 80 s "
                "per shape for a 2-layer model and CUDA graphs need a GPU); drop it for --device "
                "cpu."
            )
        inductor_cache()  # transformers imports torch._dynamo, which resolves it at import
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if device == "cuda" and not torch.cuda.is_available():
            raise UnavailableError("torch cannot run on cuda here: torch sees no CUDA device.")
        if device not in ("cpu", "cuda"):
            raise UnavailableError(f"torch runs on cpu or cuda, not {device!r}.")
        self._torch = torch
        self.dtype = torch.float16 if device == "cuda" and not reference else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(
            str(self.folder),
            dtype=self.dtype,
            attn_implementation="sdpa",
            use_safetensors=True,
            local_files_only=True,
        ).to(device)
        self.model.eval()
        self.fused_layers = 0
        if not reference:
            self._decode_layers()
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)
        self.compile = compile and not reference
        self._caches: dict[tuple[int, int], Any] = {}
        self._compiled_s: dict[tuple[int, int], float] = {}
        self._captured: dict[tuple[int, int], _CapturedStep] = {}
        self._step = self._decode
        if self.compile:
            import torch._inductor.config as inductor

            for limit in ("recompile_limit", "cache_size_limit"):  # renamed in torch 2.6
                if hasattr(torch._dynamo.config, limit):  # a graph per (sequences, length):
                    setattr(torch._dynamo.config, limit, 64)  # a recompile per point, not eager
            inductor.coordinate_descent_tuning = True  # M=1 matmul tiles: bandwidth-bound
            self._step = torch.compile(self._decode, fullgraph=True, dynamic=False)
        self.facts = self._facts(checked.architecture)

    def _decode_layers(self) -> None:
        """The decode step's layer changes (backend/runtimes/torch_layers.py): grouped-query
        attention without copies of the cache's heads, q/k/v projections as one matmul."""
        from backend.runtimes import torch_layers

        config = self.model.config
        kv_heads = getattr(config, "num_key_value_heads", None)  # absent or None: not grouped
        if kv_heads and kv_heads < getattr(config, "num_attention_heads", kv_heads):
            torch_layers.register_attention()
            self.model.set_attn_implementation(torch_layers.GROUPED_DECODE)
        self.fused_layers = torch_layers.fuse_projections(self.model)

    def _facts(self, architecture: str) -> dict[str, Any]:
        """What ran, read back from the loaded model: dtype, attention, compiled or eager."""
        import transformers

        from backend.runtimes import torch_layers

        torch, device, compile = self._torch, self.device, self.compile
        dtype = {torch.float16: "fp16", torch.float32: "fp32"}[self.dtype]
        return {
            "runtime": "transformers + PyTorch",
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
            "providers": [device],
            "device_type": torch.cuda.get_device_name() if device == "cuda" else "",
            "architecture": architecture,
            "inference_precision": dtype,  # the dtype the weights were loaded in and run
            "kv_cache_precision": dtype,
            "attention": torch_layers.ATTENTION_RAN
            if self.model.config._attn_implementation == torch_layers.GROUPED_DECODE
            else self.model.config._attn_implementation,
            "projections": f"{torch_layers.FUSED_RAN} ({self.fused_layers} layers)"
            if self.fused_layers
            else "as the model defines them",
            "compiled": COMPILED if compile else "eager",
            "cuda_graphs": bool(compile and device == "cuda"),
            "kv_cache": "transformers StaticCache (prompt + new tokens)",
            "timing": "our loop: a stamp per token after torch.cuda.synchronize()"
            if device == "cuda"
            else "our loop: a stamp per token",
            "ttft_from": "the call: prefill of the prompt and its first token",
        }

    def between_points(self) -> None:
        """Before a point, drop the last one's StaticCache and CUDA graphs and return the freed
        memory: the cache was dropped only when the next point made its own, inside that
        point's memory scope, and the heap kept the pages of its prefill's activations, so 1
        sequence of 200 tokens on the tiny Llama peaked at 537.7 MB after a point of 64 (599.6
        MB), 390.0 MB alone (0.3-0.5 s, untimed; a point of the same shape records its graphs
        again, untimed too)."""
        self._caches, self._captured, self._compiled_s = {}, {}, {}
        return_freed_memory()
        if self.device == "cuda":  # the caching allocator's blocks back to the driver
            self._torch.cuda.empty_cache()

    def close(self) -> None:
        self._caches.clear()
        self.model = None
        if self.device == "cuda":
            self._torch.cuda.empty_cache()

    def _decode(self, tokens: Any, position: Any, cache: Any) -> Any:
        return greedy_step(self.model, tokens, position, cache)

    def _cache(self, sequences: int, length: int) -> Any:
        """One StaticCache per (sequences, length), reset in place between generations: the
        same tensors every time, as CUDA graphs replay from fixed addresses."""
        from transformers import StaticCache

        key = (sequences, length)
        if key not in self._caches:
            self._caches = {}  # one shape held at a time: a point's cache, not every point's
            # a new cache is new addresses: its CUDA graphs are recorded again, off the clock
            self._compiled_s, self._captured = {}, {}
            self._caches[key] = StaticCache(config=self.model.config, max_cache_len=length)
        cache = self._caches[key]
        cache.reset()
        return cache

    def _sync(self) -> None:
        if self.device == "cuda":
            self._torch.cuda.synchronize()

    def _run(
        self, ids: Any, new_tokens: int, length: int, clock: bool
    ) -> tuple[list[Any], list[int]]:
        torch = self._torch
        sequences, prompt_len = ids.shape
        with torch.inference_mode():  # the cache's tensors are inference tensors: reset inside
            cache = self._cache(sequences, length)
        produced: list[Any] = []
        stamps: list[int] = []
        state: dict[str, Any] = {}

        def first() -> None:
            out = self.model(
                input_ids=ids,
                cache_position=torch.arange(prompt_len, device=self.device),
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            state["next"] = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
            produced.append(state["next"])
            self._sync()

        # one [1, 1] tensor per step made up front (no host copy per step), each its own
        # storage: a view's offset would be a new input layout for the compiled step
        positions = [
            p.clone() for p in torch.arange(prompt_len, length, device=self.device).view(-1, 1)
        ]

        decode = self._step
        if self.compile:
            key = (sequences, length)
            if key not in self._captured:  # in the untimed warm-up: garbage at prompt_len,
                with torch.inference_mode():  # overwritten by the first real step
                    self._captured[key] = _CapturedStep(
                        torch, self._step, cache, sequences, prompt_len
                    )
            decode = self._captured[key]

        def step() -> None:
            position = positions[len(produced) - 1].view(1, 1)
            state["next"] = decode(state["next"], position, cache).clone()
            produced.append(state["next"])
            self._sync()

        from backend.runtimes.base import timed_steps

        with torch.inference_mode():
            if clock:
                stamps = timed_steps(first, step, new_tokens)
            else:
                first()
                for _ in range(new_tokens - 1):
                    step()
        return produced, stamps

    def generate(self, prompts: np.ndarray, new_tokens: int) -> TokenTimes:
        torch = self._torch
        ids = torch.as_tensor(np.asarray(prompts, dtype=np.int64), device=self.device)
        length = ids.shape[1] + new_tokens
        key = (int(ids.shape[0]), length)
        if self.compile and key not in self._compiled_s:  # compile + record, off the clock
            started = time.perf_counter()
            self._run(ids, min(new_tokens, WARMUP_STEPS + 1), length, clock=False)
            self._compiled_s[key] = time.perf_counter() - started
        produced, stamps = self._run(ids, new_tokens, length, clock=True)
        tokens = torch.cat(produced, dim=1).cpu().numpy().astype(np.int64)
        return TokenTimes(tokens=tokens, token_ns=stamps)

    def point_facts(self, sequences: int, together: int | None) -> dict[str, Any]:
        spent = [s for (seqs, _), s in self._compiled_s.items() if seqs == sequences]
        if not spent:
            return {}
        return {"compile_warmup_s": round(spent[-1], 1), "compile_untimed": True}

    def logits(self, token_ids: np.ndarray, chunk: int) -> np.ndarray:
        """Eager (never the compiled step), through a fresh StaticCache `chunk` tokens a step."""
        from transformers import StaticCache

        torch = self._torch
        ids = torch.as_tensor(np.asarray(token_ids, dtype=np.int64).reshape(1, -1))
        ids = ids.to(self.device)
        total = ids.shape[1]
        cache = StaticCache(config=self.model.config, max_cache_len=total)
        parts = []
        with torch.inference_mode():
            for start in range(0, total, max(chunk, 1)):
                piece = ids[:, start : start + chunk]
                end = start + piece.shape[1]
                out = self.model(
                    input_ids=piece,
                    cache_position=torch.arange(start, end, device=self.device),
                    past_key_values=cache,
                    use_cache=True,
                )
                parts.append(out.logits[0].float().cpu().numpy())
        return np.concatenate(parts, axis=0)

    def encode(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer(text, add_special_tokens=False)["input_ids"]]


class _CapturedStep:
    """The compiled decode step captured once in a CUDA graph over static buffers: a call copies
    the tokens and position in and replays (two tiny copies, one launch)."""

    def __init__(self, torch: Any, compiled: Any, cache: Any, sequences: int, at: int) -> None:
        self.tokens = torch.zeros((sequences, 1), dtype=torch.long, device="cuda")
        self.position = torch.full((1, 1), at, dtype=torch.long, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # compile and autotune off the capture
            for _ in range(WARMUP_STEPS):
                compiled(self.tokens, self.position, cache)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = compiled(self.tokens, self.position, cache)

    def __call__(self, tokens: Any, position: Any, cache: Any) -> Any:
        self.tokens.copy_(tokens)
        self.position.copy_(position)
        self.graph.replay()
        return self.out
