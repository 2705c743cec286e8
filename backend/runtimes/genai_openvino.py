"""OpenVINO GenAI's LLMPipeline on an OpenVINO IR folder (openvino_model.xml + tokenizer IRs).

An ONNX Runtime GenAI folder is not its format: OpenVINO reads the builder's model.onnx but its
GroupQueryAttention becomes an internal op that cannot be saved as IR, and LLMPipeline opens IR
files only, so such a folder is refused with that reason rather than converted silently
(backend/generate/openvino_export.py makes the IR folder from the Hugging Face folder).
Perplexity reads logits from the same stateful IR compiled on the same device (LLMPipeline does
not return a prompt's logits), chunk by chunk through its KV-cache state.

LLMPipeline runs PagedAttention (its continuous-batching scheduler) where it can and falls back to
the stateful SDPA graph silently; the session names the backend, so the facts say which ran and
the KV cache is counted in that backend's layout (kv_layout). Its scheduler runs with prefix
caching off (no_prefix_cache), and each point gets a fresh pipeline (between_points).
"""

from __future__ import annotations

import importlib.metadata
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from backend.errors import UnavailableError
from backend.runtimes.base import GenAISession, TokenTimes, return_freed_memory

NEEDED = ("openvino_model.xml", "openvino_tokenizer.xml", "openvino_detokenizer.xml")
CACHE_BITS = {"u8": 8, "u4": 4, "bf16": 16, "fp16": 16, "fp32": 32}
KV = ("KEY", "VALUE")  # the CPU plugin's {KEY,VALUE}_CACHE_{PRECISION,GROUP_SIZE} properties
BLOCK_TOKENS = 32  # GenAI's CPU block size, which the CPU plugin's cache inputs are shaped for


def kv_layout(
    key: str, value: str, key_group: int, value_group: int, machine: str
) -> dict[str, Any] | None:
    """The CPU plugin's PagedAttention cache layout (footprint.KVLayout's fields) for its key and
    value cache precisions and group sizes, as OpenVINO 2026.4's CPU plugin shapes the
    key_cache.N / value_cache.N inputs that GenAI allocates (test_openvino_genai checks it on
    the installed one): keys in u8 or u4 keep an f32 scale and zero point per channel per block
    (the x86 default of KEY_CACHE_QUANT_MODE, an internal property no plugin call returns;
    openvinotoolkit/openvino PR 30166), values one per token per group of `value_group` (0: the
    whole head). None where that is not established here: a machine other than x86-64, or
    another precision."""
    if machine.lower() not in ("x86_64", "amd64") or not {key, value} <= CACHE_BITS.keys():
        return None
    return {
        "key_bits": CACHE_BITS[key],
        "value_bits": CACHE_BITS[value],
        "key_by_channel": CACHE_BITS[key] < 16,
        "key_group": key_group,
        "value_group": value_group,
        "block_tokens": BLOCK_TOKENS,
    }


def kv_counted(layout: dict[str, Any] | None, backend: str) -> str:
    """What the KV cache figure counts, said beside its precision (provenance's ran line)."""
    if layout is None:
        return (
            f"the plugin's defaults; {backend}: KV MB counts elements only, scales and zero "
            "points of a u8/u4 cache not counted (their layout here is not established)"
        )
    quantized = [
        f"{name} with an f32 scale and zero point per {per}"
        for name, bits, per in (
            ("keys", layout["key_bits"], "channel per block"),
            ("values", layout["value_bits"], "token per KV head" + _group(layout["value_group"])),
        )
        if bits < 16
    ]
    return (
        f"the plugin's defaults; {backend}: KV MB counts whole blocks of {layout['block_tokens']} "
        "tokens" + (", " + " and ".join(quantized) if quantized else "")
    )


def no_prefix_cache(ov_genai: Any) -> Any:
    """LLMPipeline's own PagedAttention scheduler (GenAI's get_latency_oriented_scheduler_config:
    SchedulerConfig's defaults with no token limit) with prefix caching off. With it on, every
    run of a point after the first found its prompts' KV blocks cached and skipped the prefill:
    time to first token 3.6 ms for a 1,024-token prompt whose prefill took 170-400 ms."""
    config = ov_genai.SchedulerConfig()
    config.max_num_batched_tokens = 2**64 - 1  # size_t's max, as GenAI sets it
    config.enable_prefix_caching = False
    return config


def precision_name(value: Any) -> str:
    """An OpenVINO element type (a precision property's value) in our names (bf16, fp32, u8)."""
    name = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return {"f32": "fp32", "f16": "fp16"}.get(name, name)


def _group(size: int) -> str:
    return f" per group of {size}" if size else ""


def pipeline_stamps(times_ms: list[float], start_ns: int, end_ns: int) -> list[int]:
    """LLMPipeline's own token times (ms of its steady clock) as ns after the call's start.

    On Linux that clock is CLOCK_MONOTONIC, perf_counter_ns's own, so the times are placed as
    they are: the work after the last token (0.1-0.2 ms on the tests' tiny Llama) is not moved
    before the first. Where they do not fall inside the call (another clock), they are anchored
    at its end, and time to first token then also holds that tail."""
    stamps = [round(t * 1e6) - start_ns for t in times_ms]
    if stamps and 0 <= stamps[0] and stamps[-1] <= end_ns - start_ns:
        return stamps
    total = end_ns - start_ns
    return [total - round((times_ms[-1] - t) * 1e6) for t in times_ms]


class OpenVinoGenAISession(GenAISession):
    name = "openvino-genai"

    def __init__(self, folder: Path, device: str) -> None:
        super().__init__(folder, device)
        missing = [name for name in NEEDED if not (self.folder / name).is_file()]
        if missing:
            raise UnavailableError(
                f"openvino-genai opens OpenVINO IR folders, and {self.folder.name} lacks "
                f"{', '.join(missing)} (an ONNX Runtime GenAI folder's GroupQueryAttention "
                "cannot be saved as OpenVINO IR); export the Hugging Face folder to OpenVINO "
                "(--openvino-from) and give that folder."
            )
        import openvino as ov
        import openvino_genai as ov_genai

        self._ov = ov_genai
        self._core = ov.Core()
        self._request: object | None = None
        plugin = device.upper()
        backend, layout = self._open(plugin)
        paged = ", prefix caching off" if backend == "PagedAttention" else ""
        self.facts = {
            "runtime": "openvino-genai",
            "versions": {
                "openvino-genai": importlib.metadata.version("openvino-genai"),
                "openvino": importlib.metadata.version("openvino"),
            },
            "providers": [plugin],
            # the plugin's own defaults, which LLMPipeline keeps: what precision really ran
            "inference_precision": self._precision(plugin, "INFERENCE_PRECISION_HINT"),
            "kv_cache_precision": self._precision(plugin, "KV_CACHE_PRECISION"),
            "attention_backend": backend,
            "precision_from": kv_counted(layout, backend.split(" (")[0] + paged),
            # every run prefills its prompts (a repeat of them is not a cache hit)
            "prefix_caching": "off" if paged else "none (SDPA keeps no cache between calls)",
            "pipeline": "a fresh LLMPipeline per point (its memory grows, never shrinks)",
            **({"kv_cache_layout": layout} if layout else {}),
            "timing": "a streamer's token times (1 sequence); LLMPipeline's raw metrics (more)",
            "ttft_from": "the call: LLMPipeline.generate on token ids, up to its first token",
        }

    def _open(self, plugin: str) -> tuple[str, dict[str, Any] | None]:
        """LLMPipeline with its attention backend named (PagedAttention, else SDPA, as its own
        fallback goes), and the KV layout of the one that opened (None: not established)."""
        folder = str(self.folder)
        try:
            self.pipeline = self._ov.LLMPipeline(
                folder, plugin, ATTENTION_BACKEND="PA", scheduler_config=no_prefix_cache(self._ov)
            )
        except RuntimeError as exc:
            self.pipeline = self._ov.LLMPipeline(folder, plugin, ATTENTION_BACKEND="SDPA")
            reason = (str(exc).strip().splitlines() or ["?"])[-1][:160]
            return f"SDPA (PagedAttention did not open: {reason})", None
        if plugin != "CPU":
            return "PagedAttention", None
        key, value = (self._precision(plugin, f"{k}_CACHE_PRECISION") for k in KV)
        groups = (int(self._core.get_property(plugin, f"{k}_CACHE_GROUP_SIZE")) for k in KV)
        return "PagedAttention", kv_layout(key, value, *groups, platform.machine())

    def _precision(self, plugin: str, key: str) -> str:
        """The plugin's default for a precision property, in our names (bf16, fp32, u8)."""
        try:
            value = self._core.get_property(plugin, key)
        except RuntimeError:  # a plugin without that property
            return "not reported"
        return precision_name(value)

    def between_points(self) -> None:
        """A fresh LLMPipeline before a point: GenAI grows its paged KV cache (and the CPU plugin
        its buffers) to the largest point so far and frees them only with the pipeline, so a
        later point's peak RSS held an earlier, larger point's (tiny Llama, 1 sequence of 200
        tokens: 190.9 MB after 64 sequences, 137.6 MB alone, 140.6 MB reopened). Reopening took
        0.2-0.5 s here, on a 365 MB IR too; it is not timed. The heap is trimmed between dropping
        and reopening, as ORT GenAI's and torch's sessions do; on the tiny Llama that moved the
        point little (141.0-141.5 MB to 140.7-141.3, 136.7-137.5 alone, three runs each): most
        of what remains is the new pipeline's compile (139.3-139.6 MB trimmed after it too)."""
        self.pipeline = None  # freed before the next one compiles
        return_freed_memory()
        backend, _ = self._open(self.device.upper())
        if backend != self.facts["attention_backend"]:
            raise RuntimeError(
                f"openvino-genai reopened with {backend} where its session opened with "
                f"{self.facts['attention_backend']}"
            )

    def close(self) -> None:
        self.pipeline = None
        self._request = None

    def generate(self, prompts: np.ndarray, new_tokens: int) -> TokenTimes:
        """Exactly new_tokens: min_new_tokens = max_new_tokens and ignore_eos; per-token times
        from a streamer (one sequence) or, as LLMPipeline streams one sequence only, from the
        pipeline's own token times (several; pipeline_stamps)."""
        import openvino as ov

        config = self._ov.GenerationConfig()
        config.max_new_tokens = new_tokens
        config.min_new_tokens = new_tokens
        config.ignore_eos = True
        config.do_sample = False
        ids = np.ascontiguousarray(prompts, dtype=np.int64)
        inputs = self._ov.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids)))
        stamps: list[int] = []
        clock = time.perf_counter_ns

        class Stamps(self._ov.StreamerBase):  # type: ignore[name-defined,misc]
            def write(self, token: object) -> object:
                count = len(token) if isinstance(token, list) else 1
                stamps.extend([clock() - start] * count)
                return self_ov.StreamingStatus.RUNNING

            def end(self) -> None:
                pass

        self_ov = self._ov
        start = clock()
        if ids.shape[0] == 1:
            result = self.pipeline.generate(inputs, config, Stamps())
        else:
            result = self.pipeline.generate(inputs, config)
            times = list(result.perf_metrics.raw_metrics.m_new_token_times)
            stamps = pipeline_stamps(times, start, clock())
        tokens = np.asarray(result.tokens, dtype=np.int64).reshape(ids.shape[0], -1)
        tokens = tokens[:, -new_tokens:]
        if tokens.shape[1] != new_tokens or len(stamps) != new_tokens:
            raise RuntimeError(
                f"openvino-genai produced {len(stamps)} timed tokens where {new_tokens} were asked"
            )
        return TokenTimes(tokens=tokens, token_ns=stamps)

    def logits(self, token_ids: np.ndarray, chunk: int) -> np.ndarray:
        if self._request is None:
            compiled = self._core.compile_model(
                str(self.folder / "openvino_model.xml"), self.device.upper()
            )
            self._request = compiled.create_infer_request()
        request = self._request
        request.reset_state()  # type: ignore[attr-defined]
        ids = np.asarray(token_ids, dtype=np.int64).reshape(1, -1)
        parts = []
        for start in range(0, ids.shape[1], max(chunk, 1)):
            piece = ids[:, start : start + chunk]
            end = start + piece.shape[1]
            request.infer(  # type: ignore[attr-defined]
                {
                    "input_ids": piece,
                    "attention_mask": np.ones((1, end), dtype=np.int64),
                    "position_ids": np.arange(start, end, dtype=np.int64)[None, :],
                    "beam_idx": np.zeros(1, dtype=np.int32),
                }
            )
            parts.append(np.array(request.get_tensor("logits").data, dtype=np.float32)[0])  # type: ignore[attr-defined]
        return np.concatenate(parts, axis=0)

    def encode(self, text: str) -> list[int]:
        encoded = self.pipeline.get_tokenizer().encode(text)
        return [int(t) for t in np.asarray(encoded.input_ids.data).reshape(-1)]
