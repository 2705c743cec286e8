"""What a generation benchmark measures (GenerationSpec) and its presets, apart from the run
(backend/generate/benchmark.py, numpy and the runtimes, re-exports them): the CLI's `generate`
flags and the job's spec read them, and every CLI call builds that parser."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from backend.errors import UserError
from backend.measure_settings import MeasureSettings
from backend.runtimes import ENGINE_MODES, GENAI_RUNTIMES

# A generation is one call of seconds, not milliseconds: few runs per window, same rule.
GENERATION_PRESETS: dict[str, MeasureSettings] = {
    "quick": MeasureSettings(
        warmup_runs=0,
        window_runs=2,
        window_min_seconds=0.0,
        stable_windows=2,
        stability_tolerance=0.25,
        max_seconds=20.0,
    ),
    "standard": MeasureSettings(
        warmup_runs=1,
        window_runs=3,
        window_min_seconds=0.5,
        stable_windows=3,
        stability_tolerance=0.10,
        max_seconds=60.0,
    ),
}


@dataclass(frozen=True)
class GenerationSpec:
    """What to measure; checks itself (one sentence per bad field)."""

    runtimes: tuple[str, ...] = ("ort-genai",)
    device: str = "cpu"
    prompt_lengths: tuple[int, ...] = (128,)
    new_tokens: tuple[int, ...] = (64,)
    sequences: tuple[int, ...] = (1,)
    preset: str = "standard"
    seed: int = 0
    perplexity_window: int = 256
    perplexity_chunk: int = 32
    perplexity_tokens: int = 1024
    cuda_graph: bool = False  # ONNX Runtime GenAI on CUDA: decode steps replayed as CUDA graphs
    # ONNX Runtime GenAI's Engine (one Request per sequence): auto above the Generator's 32
    # sequences (and for PagedAttention models), on for every point, off never
    engine: str = "auto"
    torch_compile: bool = False  # the torch runtime: decode step via torch.compile (CUDA graphs)

    def __post_init__(self) -> None:
        for name in ("runtimes", "prompt_lengths", "new_tokens", "sequences"):  # each once
            object.__setattr__(self, name, tuple(dict.fromkeys(getattr(self, name))))
        unknown = [name for name in self.runtimes if name not in GENAI_RUNTIMES]
        if unknown:
            known = ", ".join(GENAI_RUNTIMES)
            raise UserError(f"Unknown generative runtime {unknown[0]!r}; choose from {known}.")
        if self.engine not in ENGINE_MODES:
            raise UserError(f"--engine takes {', '.join(ENGINE_MODES)}, not {self.engine!r}.")
        if self.cuda_graph and self.device != "cuda":
            raise UserError("--cuda-graph needs --device cuda (CUDA graphs run on NVIDIA GPUs).")
        for name in ("prompt_lengths", "new_tokens", "sequences"):
            values = getattr(self, name)
            if not values or any(int(v) < 1 for v in values):
                raise UserError(f"--{name.replace('_', '-')} takes positive integers, e.g. 1,4.")
        if not self.runtimes:
            raise UserError("--runtimes needs at least one runtime, e.g. ort-genai.")
        least = {"perplexity_window": 2, "perplexity_chunk": 1, "perplexity_tokens": 2, "seed": 0}
        for name, low in least.items():
            if getattr(self, name) < low:
                flag = f"--{name.replace('_', '-')}"
                raise UserError(f"{flag} takes {low} or more, not {getattr(self, name)}.")
        if self.cuda_graph and "ort-genai" not in self.runtimes:
            raise UserError(
                "--cuda-graph is an option of ONNX Runtime GenAI; add ort-genai to --runtimes (the "
                "torch runtime replays CUDA graphs through --torch-compile)."
            )
        if self.torch_compile and "torch" not in self.runtimes:
            raise UserError(
                "--torch-compile is an option of the torch runtime; add torch to --runtimes."
            )
        if self.preset not in GENERATION_PRESETS:
            known = ", ".join(GENERATION_PRESETS)
            raise UserError(f"Unknown preset {self.preset!r}; choose from {known}.")

    def points(self) -> list[tuple[int, int, int]]:
        return [
            (p, n, s) for p in self.prompt_lengths for n in self.new_tokens for s in self.sequences
        ]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationSpec:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
