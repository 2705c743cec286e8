"""The runtime interface: one module per runtime, registered by name."""

from __future__ import annotations

import ctypes
import gc
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from backend.errors import UnavailableError
from backend.specs import Configuration, Precision

if TYPE_CHECKING:  # a type only: the registry (and the CLI's parser under it) needs no numpy
    import numpy as np


@dataclass(frozen=True)
class ProviderStatus:
    """Whether a runtime can run on one device kind here, and if not, why not."""

    name: str  # short name used in configs: "cpu", "cuda", "tensorrt"
    available: bool
    reason: str = ""  # why it is unavailable, or a detail such as the device name
    native_name: str = ""  # the runtime's own name, e.g. CUDAExecutionProvider


@dataclass(frozen=True)
class SessionOptions:
    """What a runner opens a session with: the typed Configuration itself (provider, precision,
    threads, optimization level, every runtime group), read by the runners where they need a knob,
    and only what is not a knob beside it. A session opened outside a sweep (a reference, a
    profile, a load check) holds a Configuration too (`plain`), so there is one shape."""

    configuration: Configuration
    optimized_model_path: Path | None = None  # where the runtime may save its optimized graph
    profile_prefix: Path | None = None  # set: the runtime's own per-node profiler is on
    perf_counters: bool = True  # OpenVINO's per-layer counters (off where a bench times without)

    @classmethod
    def plain(cls, optimized_model_path: Path | None = None, **knobs: Any) -> SessionOptions:
        """A session outside a sweep (a reference, a load check, a profile): the graph as built
        (FP32 names no conversion; ORT runs the graph it is given), these knobs, the rest at
        their defaults."""
        return cls(
            Configuration(precision=Precision.FP32, **knobs),
            optimized_model_path=optimized_model_path,
        )


@dataclass(frozen=True)
class ModelQuery:
    """A runtime's own answer, per tensor of the model, of what one device takes.

    tensors maps each named output tensor of the source graph to the runtime op types, among the
    ops computing it, that the device does NOT take (empty: it takes them all). When the model
    cannot be read or compiled, stage says which step failed and error holds the runtime's words.
    """

    runtime: str
    device: str
    tensors: dict[str, tuple[str, ...]] = field(default_factory=dict)
    stage: str = ""  # "", "read" or "compile"
    error: str = ""
    # ops the runtime's error names, e.g. {"Col2Im-18": "output_size must be ... Got: [3]"}
    failed_ops: dict[str, str] = field(default_factory=dict)


class DeviceRun(Protocol):
    """Inputs and outputs held on the device: run() times the model without host copies."""

    def run(self) -> None: ...

    def outputs(self) -> list[np.ndarray]: ...

    def infer(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]: ...


class Runner(ABC):
    """An open inference session. The base owns timing; subclasses fill the *_impl hooks."""

    def __init__(self, model_path: Path, options: SessionOptions) -> None:
        self.model_path = Path(model_path)
        self.options = options
        self.session_create_ms: float | None = None
        self.providers_used: list[str] = []
        # what the runtime says it really runs (e.g. execution precision, device, streams), read
        # back from the compiled model rather than echoed from the request
        self.facts: dict[str, Any] = {}
        self.notes: list[str] = []  # what the runtime chose for this host and why, for the result

    def __enter__(self) -> Runner:
        started = time.perf_counter()
        self.activate_impl()
        self.session_create_ms = (time.perf_counter() - started) * 1e3
        return self

    def __exit__(self, *exc: object) -> None:
        self.deactivate_impl()

    @abstractmethod
    def activate_impl(self) -> None:
        """Create the session; must set providers_used from what the runtime really took."""

    @abstractmethod
    def deactivate_impl(self) -> None: ...

    @abstractmethod
    def input_specs(self) -> list[dict[str, Any]]:
        """[{name, dtype (numpy name), shape (ints or dim names)}] as the session sees them."""

    @abstractmethod
    def output_names(self) -> list[str]: ...

    @abstractmethod
    def infer(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run once on host arrays and return host arrays (copies included in the timing)."""

    def bind_on_device(self, feeds: dict[str, np.ndarray]) -> DeviceRun:
        """Copy the feeds to the device once for device-resident timing; most runners cannot."""
        raise UnavailableError(
            f"{type(self).__name__} has no device-resident mode; time it end to end instead"
        )

    def layer_profile(self) -> list[dict[str, Any]]:
        """Per-layer counters of the last inference, where the runtime keeps them."""
        return []

    def end_profiling(self) -> Path:
        """Stop the runtime's profiler and return its trace file; runtimes without one refuse."""
        raise UnavailableError(f"{type(self).__name__} has no per-node profiler")


class Runtime(ABC):
    """A runtime such as ONNX Runtime or TensorRT: says what it can run here, opens runners."""

    name: str = ""

    @abstractmethod
    def version(self) -> str: ...

    @abstractmethod
    def providers(self) -> list[ProviderStatus]:
        """Every device kind this runtime knows, available or with the reason it is not."""

    @abstractmethod
    def open(self, model_path: Path, options: SessionOptions) -> Runner:
        """A runner for the model; raises UnavailableError if the configuration's provider cannot
        be used."""

    def precision_unavailable(self, precision: Precision, provider: str) -> str | None:
        """Why this runtime cannot run `precision` on `provider` here, or None when it can."""
        return None

    def query_model(self, model_path: Path, provider: str) -> ModelQuery | None:
        """The runtime's own per-node answer for a model, or None where it has no such query."""
        return None

    def provider_status(self, provider: str) -> ProviderStatus | None:
        """One provider's status; runtimes override it when probing all of them is costly."""
        return next((s for s in self.providers() if s.name == provider), None)

    def require(self, provider: str) -> ProviderStatus:
        status = self.provider_status(provider)
        if status is not None:
            if not status.available:
                raise UnavailableError(
                    f"{self.name} provider {provider!r} is unavailable here: {status.reason}"
                )
            return status
        known = ", ".join(s.name for s in self.providers())
        raise UnavailableError(
            f"{self.name} has no provider {provider!r}; known providers: {known}."
        )


class MissingRuntime(Runtime):
    """A runtime whose library is not installed: it reports why instead of failing late."""

    def __init__(self, name: str, reason: str, provider_names: tuple[str, ...] = ("gpu",)) -> None:
        self.name = name
        self.reason = reason
        self.provider_names = provider_names

    def version(self) -> str:
        return "not installed"

    def providers(self) -> list[ProviderStatus]:
        return [ProviderStatus(p, False, self.reason) for p in self.provider_names]

    def open(self, model_path: Path, options: SessionOptions) -> Runner:
        raise UnavailableError(f"{self.name} is unavailable here: {self.reason}")


_OUT_OF_MEMORY = re.compile(
    r"out of memory|failed to allocate memory|alloc_failed|bfcarena|cudaErrorMemoryAllocation"
    r"|can't allocate memory",  # torch's CPU allocator
    re.IGNORECASE,
)


def is_out_of_memory(exc: BaseException) -> bool:
    """A full device, as ORT words it (the arena, CUDA or cuDNN failing to allocate), or torch's
    CPU allocator."""
    return bool(_OUT_OF_MEMORY.search(str(exc)))


# ---- generative sessions (a KV cache, token by token): not Runners --------------------------


@dataclass
class TokenTimes:
    """One generation: the tokens each sequence produced and when (ns after the call began).

    token_ns[i] is when token i of every sequence was ready. Where sequences decode as one batch
    (the Generator) that is each sequence's own time, so token_ns[0] is the time to first token
    and the gaps after it are the inter-token latencies. Where a scheduler runs them apart (the
    Engine), sequence_ns holds each sequence's own times and the samples come from those.
    """

    tokens: np.ndarray  # [sequences, new tokens] int
    token_ns: list[int]
    sequence_ns: list[list[int]] | None = None  # [sequences][new tokens], when they differ
    together: int | None = None  # most sequences that got a token in one step (None: all)

    @property
    def ttft_ms(self) -> float:
        return self.token_ns[0] / 1e6

    @property
    def ttft_samples_ms(self) -> list[float]:
        """Time to first token of each sequence (one sample where they decode as one batch)."""
        if self.sequence_ns is None:
            return [self.ttft_ms]
        return [own[0] / 1e6 for own in self.sequence_ns]

    @property
    def itl_ms(self) -> list[float]:
        """Every sequence's own gaps between consecutive tokens (one set for one batch)."""
        series = [self.token_ns] if self.sequence_ns is None else self.sequence_ns
        return [(b - a) / 1e6 for own in series for a, b in zip(own, own[1:], strict=False)]

    @property
    def concurrent(self) -> int:
        """Sequences decoded per step: all of them unless a scheduler ran fewer together."""
        return self.together if self.together else int(self.tokens.shape[0])

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

    def between_points(self) -> None:
        """Before each point after the first: free what an earlier point left held, so a point's
        peak memory is its own (OpenVINO GenAI reopens its pipeline); most runtimes hold nothing."""
        return None

    def point_facts(self, sequences: int, together: int | None) -> dict[str, Any]:
        """What ran a point of `sequences` beyond the session's facts (e.g. which scheduler and
        how many sequences it decoded together); runtimes with one path say nothing more."""
        return {}

    def logits(self, token_ids: np.ndarray, chunk: int) -> np.ndarray:
        """Logits [len, vocab] of every position of one sequence, fed `chunk` tokens at a time
        through the KV cache (chunk >= len: one full forward pass)."""
        raise UnavailableError(f"{self.name} does not expose the logits of a prompt here.")

    def encode(self, text: str) -> list[int]:
        """The model's own tokenizer on text."""
        raise UnavailableError(f"{self.name} has no tokenizer open here.")


def return_freed_memory() -> None:
    """Collect garbage, then hand the C heap's free pages back (glibc's malloc_trim): freed
    buffers otherwise stay in the process's RSS, where the next point's peak starts from them
    (in one process, the tiny Llama's torch point of 1 sequence peaked at 580 MB after a point of
    64 with that point's cache freed, 502 MB trimmed too, 501 alone). A C library without
    malloc_trim keeps them."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # not glibc
        pass


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
