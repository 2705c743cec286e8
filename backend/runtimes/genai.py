"""Generative runtimes (a model folder with a KV cache, token by token), registered by name.

A generation session is not a `Runner`: it owns its KV cache and decodes token by token, so it
has its own small interface. Like BACKENDS, a runtime whose library is missing registers as
unavailable with the reason; runtimes/ stays the one place that opens a runtime session.
"""

from __future__ import annotations

import importlib.util
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backend.errors import UnavailableError


@dataclass
class TokenTimes:
    """One generation: the tokens each sequence produced and when (ns after the call began).

    token_ns[i] is when token i of every sequence was ready (sequences decode together), so
    token_ns[0] is the time to first token and the gaps after it are the inter-token latencies.
    """

    tokens: np.ndarray  # [sequences, new tokens] int
    token_ns: list[int]

    @property
    def ttft_ms(self) -> float:
        return self.token_ns[0] / 1e6

    @property
    def itl_ms(self) -> list[float]:
        return [(b - a) / 1e6 for a, b in zip(self.token_ns, self.token_ns[1:], strict=False)]

    @property
    def total_ms(self) -> float:
        return self.token_ns[-1] / 1e6


@dataclass(frozen=True)
class GenAIStatus:
    name: str
    available: bool
    reason: str = ""


class GenAISession(ABC):
    """An open generative model: greedy generation of exactly N tokens, and logits for text."""

    name: str = ""

    def __init__(self, folder: Path, device: str) -> None:
        self.folder = Path(folder)
        self.device = device
        # what the runtime says ran: providers, versions, precisions (read back, not echoed)
        self.facts: dict[str, Any] = {}

    def __enter__(self) -> GenAISession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None:
        """Release the model (the runtime frees it with the last reference)."""

    @abstractmethod
    def generate(self, prompts: np.ndarray, new_tokens: int) -> TokenTimes:
        """Greedy decoding of exactly new_tokens per sequence (EOS ignored) from prompts
        [sequences, prompt length], timed token by token."""

    def logits(self, token_ids: np.ndarray, chunk: int) -> np.ndarray:
        """Logits [len, vocab] of every position of one sequence, fed `chunk` tokens at a time
        through the KV cache (chunk >= len: one full forward pass)."""
        raise UnavailableError(f"{self.name} does not expose the logits of a prompt here.")

    def encode(self, text: str) -> list[int]:
        """The model's own tokenizer on text."""
        raise UnavailableError(f"{self.name} has no tokenizer open here.")


def timed_steps(first: Callable[[], None], step: Callable[[], None], count: int) -> list[int]:
    """Run first() (prefill and the first token) then step() count-1 times; ns after start
    at which each token was ready, from perf_counter_ns."""
    clock = time.perf_counter_ns
    start = clock()
    first()
    stamps = [clock() - start]
    for _ in range(count - 1):
        step()
        stamps.append(clock() - start)
    return stamps


def _ort_genai(folder: Path, device: str) -> GenAISession:
    from backend.runtimes.genai_ort import OrtGenAISession

    return OrtGenAISession(folder, device)


def _openvino_genai(folder: Path, device: str) -> GenAISession:
    from backend.runtimes.genai_openvino import OpenVinoGenAISession

    return OpenVinoGenAISession(folder, device)


GENAI_RUNTIMES: dict[str, tuple[str, Callable[[Path, str], GenAISession]]] = {
    # name -> (the Python module it needs, factory)
    "ort-genai": ("onnxruntime_genai", _ort_genai),
    "openvino-genai": ("openvino_genai", _openvino_genai),
}


def genai_status(name: str) -> GenAIStatus:
    """Whether a generative runtime can open models here, and if not, why not."""
    if name not in GENAI_RUNTIMES:
        known = ", ".join(GENAI_RUNTIMES)
        return GenAIStatus(name, False, f"unknown generative runtime {name!r}; choose from {known}")
    module, _ = GENAI_RUNTIMES[name]
    if importlib.util.find_spec(module) is None:
        return GenAIStatus(
            name, False, f"the {module!r} Python package is not installed (requirements.txt)"
        )
    return GenAIStatus(name, True)


def open_genai(name: str, folder: Path, device: str = "cpu") -> GenAISession:
    """A session of a registered generative runtime on a model folder; UnavailableError (one
    sentence) when the runtime or the device is not there, or the folder is not its format."""
    status = genai_status(name)
    if not status.available:
        raise UnavailableError(f"{name} cannot run here: {status.reason}.")
    return GENAI_RUNTIMES[name][1](Path(folder), device)
