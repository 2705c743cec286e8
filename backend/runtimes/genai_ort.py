"""ONNX Runtime GenAI on a GenAI model folder (genai_config.json + model.onnx + tokenizer)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np

from backend.errors import UnavailableError
from backend.runtimes.base import GenAISession, TokenTimes, return_freed_memory, timed_steps
from backend.runtimes.genai_engine import (
    ENGINE_MODES,
    GENERATOR_MAX_SEQUENCES,
    dynamic_batching,
    engine_generate,
    engine_overlay,
    scheduler_words,
)

DEVICES = {"cpu": None, "cuda": "cuda"}  # ours -> the provider name genai_config takes
# ORT's sdpa_kernel bitmask: flash (1) + memory-efficient (2) + math (16), not cuDNN's flash
# attention (8), whose graph fails to build for GQA prefill on an H200 (cuDNN 9.14 and 9.19)
CUDA_ATTENTION_KERNELS = 1 | 2 | 16


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _onnxruntime_version() -> str:
    """The ONNX Runtime GenAI runs on: the module's own version (a GPU host's onnxruntime-gpu
    is not the `onnxruntime` distribution, and an unpacked wheel has no metadata at all)."""
    try:
        import onnxruntime
    except ImportError:
        return "not installed"
    return str(getattr(onnxruntime, "__version__", None) or _version("onnxruntime"))


def _preload_cuda_libraries() -> None:
    """Load CUDA's libraries from the nvidia-* wheels before GenAI's CUDA library needs them: a
    sandboxed child has no LD_LIBRARY_PATH of the host's shell, and onnxruntime-genai-cuda
    (unlike onnxruntime-gpu's Python module) does not look in those wheels itself."""
    try:
        import onnxruntime
    except ImportError:  # GenAI then says which library it could not load
        return
    preload = getattr(onnxruntime, "preload_dlls", None)
    if preload is not None:
        preload(cuda=True, cudnn=False, msvc=False)  # attention runs without cuDNN (above)


class OrtGenAISession(GenAISession):
    """og.Model on the folder; the provider is set on its config (CPU: none appended).

    A point runs through the Generator (every sequence one batch, at most 32) or the Engine
    (each sequence a Request, any number): engine "auto" takes the Engine above 32 sequences
    and for PagedAttention models (their genai_config asks for it), "on" for every point,
    "off" never. point_facts says which ran."""

    name = "ort-genai"

    def __init__(
        self, folder: Path, device: str, cuda_graph: bool = False, engine: str = "auto"
    ) -> None:
        super().__init__(folder, device)
        import onnxruntime_genai as og

        if engine not in ENGINE_MODES:
            raise UnavailableError(f"--engine takes {', '.join(ENGINE_MODES)}, not {engine!r}.")

        if not (self.folder / "genai_config.json").is_file():
            raise UnavailableError(
                f"{self.folder.name} has no genai_config.json, so ONNX Runtime GenAI cannot open "
                "it; give an ONNX Runtime GenAI folder or a Hugging Face folder to convert."
            )
        if device not in DEVICES:
            raise UnavailableError(f"ort-genai runs on {', '.join(DEVICES)} here, not {device!r}.")
        if device == "cuda" and not og.is_cuda_available():
            raise UnavailableError(
                "ort-genai cannot use CUDA here: this onnxruntime-genai has no CUDA support "
                "(install onnxruntime-genai-cuda on a GPU host)."
            )
        if cuda_graph and device != "cuda":
            raise UnavailableError("CUDA graphs need --device cuda; this run is on the CPU.")
        if device == "cuda":
            _preload_cuda_libraries()
        self._og = og
        self._cuda_graph = cuda_graph
        self._engine_mode = engine
        self._engine: object | None = None
        self._open_model()
        self.facts = {
            "runtime": "onnxruntime-genai",
            "versions": {
                "onnxruntime-genai": getattr(og, "__version__", _version("onnxruntime-genai")),
                "onnxruntime": _onnxruntime_version(),
            },
            "device_type": self.model.device_type,  # what the model was placed on, as ORT says
            "providers": [DEVICES[device] or "cpu"],
            "cuda_graph": cuda_graph,
            "attention_kernels": "flash, memory-efficient, math" if device == "cuda" else "cpu",
            "ttft_from": "the call: generator and KV cache creation, prefill, first token",
            "model": "a fresh og.Model per point (ONNX Runtime's arena grows, never shrinks)",
        }

    def _config(self, overlay: dict[str, object]) -> object:
        import json

        config = self._og.Config(str(self.folder))
        config.overlay(json.dumps(overlay))
        config.clear_providers()
        if DEVICES[self.device]:
            config.append_provider(DEVICES[self.device])
        if self.device == "cuda":
            config.set_provider_option("cuda", "sdpa_kernel", str(CUDA_ATTENTION_KERNELS))
        if self._cuda_graph:  # one decode step's kernels replayed as one graph launch
            config.set_provider_option("cuda", "enable_cuda_graph", "1")
        return config

    def between_points(self) -> None:
        """A fresh og.Model before a point: ONNX Runtime's CPU arena keeps the buffers of the
        largest point so far for the model's life, so a later point's peak RSS held an earlier,
        larger point's (tiny Llama, 1 sequence of 200 tokens: 221.1 MB after 32 sequences, 93.7
        MB alone). Dropping the model frees the arena, and trimming the heap the pages glibc
        kept; this took 0.11 s on the tiny Llama, untimed."""
        self.close()
        return_freed_memory()
        self._open_model()

    def _open_model(self) -> None:
        """og.Model configured for one sequence (a point's Engine reopens it for more) and its
        tokenizer: at the session's start and again between points."""
        self._engine_batch = 0  # the max batch a reopened Engine model was configured for
        self.model = self._og.Model(self._config(engine_overlay(self.folder, 1)))
        self.tokenizer = self._og.Tokenizer(self.model)

    def close(self) -> None:
        self._engine = None
        self.model = None  # type: ignore[assignment]
        self.tokenizer = None  # type: ignore[assignment]

    def uses_engine(self, sequences: int) -> bool:
        if self._engine_mode == "off":
            return False
        if self._engine_mode == "on" or dynamic_batching(self.folder) is not None:
            return True
        return sequences > GENERATOR_MAX_SEQUENCES

    def _engine_for(self, sequences: int) -> object:
        """One Engine for the session (a paged model's Engine reserves its KV blocks when made),
        made again on a reopened model only when dynamic batching's max batch must grow."""
        overlay = engine_overlay(self.folder, sequences)
        grow = "engine" in overlay and sequences > self._engine_batch
        if self._engine is not None and not grow:
            return self._engine
        self._engine = None  # the old Engine's reservation goes before another is made
        if grow:
            self.model = self._og.Model(self._config(overlay))
            self._engine_batch = sequences
        self._engine = self._og.Engine(self.model)
        return self._engine

    def point_facts(self, sequences: int, together: int | None) -> dict[str, object]:
        """What ran a point of `sequences`: the Generator's one batch, or the Engine's
        scheduler with its max batch and how many sequences it really decoded together."""
        if not self.uses_engine(sequences):
            return {"engine": f"off: the Generator ran one batch of {sequences}"}
        engine = self._engine_for(sequences)
        max_batch = int(engine.get_capabilities().configured_max_batch_size)  # type: ignore[attr-defined]
        return {
            "engine": scheduler_words(self.folder, max_batch),
            "sequences_together": together or 0,
            "ttft_from": "the call: the Requests' creation, then each sequence's own prefill "
            "and first token (TTFT and ITL percentiles are over every sequence's own times)",
        }

    def _generator(self, length: int, batch: int, exact: bool) -> object:
        params = self._og.GeneratorParams(self.model)
        options: dict[str, object] = {"max_length": length, "batch_size": batch, "do_sample": False}
        if exact:  # EOS suppressed until max_length: exactly the asked number of tokens
            options["min_length"] = length
        params.set_search_options(**options)
        return self._og.Generator(self.model, params)

    def generate(self, prompts: np.ndarray, new_tokens: int) -> TokenTimes:
        """The clock starts before the generator is made (its KV cache is allocated there), so
        time to first token holds allocation, prefill and the first token's selection."""
        prompts = np.ascontiguousarray(prompts, dtype=np.int32)
        batch, prompt_len = prompts.shape
        if self.uses_engine(batch):
            return engine_generate(self._og, self._engine_for(batch), prompts, new_tokens)
        holder: dict[str, object] = {}

        def first() -> None:
            generator = self._generator(prompt_len + new_tokens, batch, exact=True)
            generator.append_tokens(prompts)  # type: ignore[attr-defined]
            generator.generate_next_token()  # type: ignore[attr-defined]
            holder["g"] = generator

        def step() -> None:
            holder["g"].generate_next_token()  # type: ignore[attr-defined]

        stamps = timed_steps(first, step, new_tokens)
        generator = holder["g"]
        tokens = np.stack(
            [np.asarray(generator.get_sequence(i))[prompt_len:] for i in range(batch)]  # type: ignore[attr-defined]
        )
        if tokens.shape[1] != new_tokens or not generator.is_done():  # type: ignore[attr-defined]
            raise RuntimeError(
                f"ort-genai produced {tokens.shape[1]} tokens where {new_tokens} were asked"
            )
        return TokenTimes(tokens=tokens, token_ns=stamps)

    def logits(self, token_ids: np.ndarray, chunk: int) -> np.ndarray:
        ids = np.asarray(token_ids, dtype=np.int32).reshape(1, -1)
        generator = self._generator(ids.shape[1], 1, exact=False)
        parts = []
        for start in range(0, ids.shape[1], max(chunk, 1)):
            generator.append_tokens(ids[:, start : start + chunk])  # type: ignore[attr-defined]
            parts.append(np.asarray(generator.get_output("logits"), dtype=np.float32)[0])  # type: ignore[attr-defined]
        return np.concatenate(parts, axis=0)

    def encode(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer.encode(text)]
