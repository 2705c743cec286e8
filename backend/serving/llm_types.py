"""What an LLM load point is: a serving LoadPoint plus the token-level numbers and goodput.

The `LoadPoint` inside carries what every serving point carries (scenario, load spec, achieved
request rate, end-to-end latency, stability verdict, errors, notes), so LLM points are stored and
read like serving study points; the token columns sit beside it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from backend.errors import UserError
from backend.results import LatencyStats
from backend.serving.types import LoadPoint


@dataclass(frozen=True)
class TokenSlo:
    """A request meets the SLO when its time to first token is at most ttft_ms and the p99 of
    its own inter-token latencies is at most itl_ms."""

    ttft_ms: float
    itl_ms: float

    def __post_init__(self) -> None:
        if self.ttft_ms <= 0 or self.itl_ms <= 0:
            raise UserError("An SLO needs positive bounds: --slo-ttft-ms and --slo-itl-ms in ms.")

    def met(self, ttft_ms: float, itl_p99_ms: float) -> bool:
        return ttft_ms <= self.ttft_ms and itl_p99_ms <= self.itl_ms

    @property
    def label(self) -> str:
        return f"TTFT <= {self.ttft_ms:g} ms and ITL p99 <= {self.itl_ms:g} ms"


@dataclass(frozen=True)
class PromptShape:
    """Every request's prompt length and its exact number of generated tokens."""

    prompt_tokens: int = 32
    output_tokens: int = 32

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1 or self.output_tokens < 1:
            raise UserError("Prompt and output lengths must be at least 1 token each.")


@dataclass(frozen=True)
class LlmLoadPoint:
    """One measured load point of a served LLM."""

    point: LoadPoint  # achieved_rps and latency (end to end) are over the successful requests
    shape: PromptShape
    serving: str  # instances x sequences, as LlmServing.label says
    ttft: LatencyStats  # first streamed token, per request
    itl: LatencyStats | None  # every gap between consecutive tokens; None at 1 output token
    output_tokens_per_s: float
    slo: TokenSlo | None = None
    # each request's mean gap, (end to end - TTFT) / (tokens - 1): ITL as aiperf and genai-perf
    # define it (their percentiles are over requests); None at 1 output token
    itl_request_mean: LatencyStats | None = None
    met_slo: int = 0  # successful requests that met the SLO
    goodput_rps: float | None = None  # met_slo over the same window as achieved_rps

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["point"] = self.point.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LlmLoadPoint:
        return cls(
            point=LoadPoint.from_dict(data["point"]),
            shape=PromptShape(**data["shape"]),
            serving=data["serving"],
            ttft=LatencyStats(**data["ttft"]),
            itl=LatencyStats(**data["itl"]) if data.get("itl") else None,
            output_tokens_per_s=data["output_tokens_per_s"],
            slo=TokenSlo(**data["slo"]) if data.get("slo") else None,
            itl_request_mean=(
                LatencyStats(**data["itl_request_mean"]) if data.get("itl_request_mean") else None
            ),
            met_slo=data.get("met_slo", 0),
            goodput_rps=data.get("goodput_rps"),
        )
