"""What a generation run hands back (benchmark.py fills it; the CLI's --json, the worker's
stored points and every report read it): one result per runtime x point, and the run's report.

A point that did not run (failed, unavailable) carries no figures: each is None (null in the
JSON), never a 0.0 that reads as measured. Points stored before 2026-12-08 held 0.0 there;
`without_figures` reads those as none."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from backend import energy

MEASURED = ("ok", "wrong outputs")
# what a point measured (and its verdict on stability): None where it did not run
FIGURES = (
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "e2e_p50_ms",
    "output_tokens_per_s",
    "decode_tokens_per_s",
    "first_run_ms",
    "runs",
    "stable",
    "weights_mb",
    "kv_cache_mb",
    "peak_rss_mb",
)


@dataclass
class GenerationResult:
    """One runtime on one (prompt length, new tokens, sequences) point."""

    runtime: str
    prompt_tokens: int
    new_tokens: int
    sequences: int
    status: str = "ok"  # "ok", "failed" or "unavailable"
    error: str = ""
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p50_ms: float | None = None
    output_tokens_per_s: float | None = None  # sequences x new tokens / end-to-end latency
    decode_tokens_per_s: float | None = None  # sequences / inter-token latency
    first_run_ms: float | None = None
    runs: int | None = None
    stable: bool | None = None
    stop_reason: str = ""
    weights_mb: float | None = None
    kv_cache_mb: float | None = None  # at prompt + new tokens, every sequence
    peak_rss_mb: float | None = None
    rss_scope: str = ""
    precision: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)  # the host: CPU, GPUs, versions
    roofline: dict[str, Any] = field(default_factory=dict)
    agreement: list[int] = field(default_factory=list)  # tokens until divergence, per sequence
    # where a sequence left the reference: its logit of its token minus the reference's token's
    split_margins: list[float] = field(default_factory=list)
    tokens: list[list[int]] = field(default_factory=list)  # the first run's, for agreement
    # J per generated token over the kept windows, idle power apart, or why not measurable
    energy: energy.EnergyReport | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def did_not_run(self, status: str, error: str) -> None:
        """The point failed (or its runtime was unavailable): its status and why, no figures
        (the weights and KV cache it was to hold are in the error where they explain it)."""
        self.status, self.error = status, error
        for name in FIGURES:
            setattr(self, name, None)


def without_figures(payload: dict[str, Any]) -> dict[str, Any]:
    """A stored point as it reads now: one that did not run has every figure None, whether it
    was stored with 0.0 there (before 2026-12-08), with None, or without them (a variant the
    runtime refused); a measured point as it is."""
    if payload.get("status") in MEASURED:
        return payload
    return {**payload, **dict.fromkeys(FIGURES)}


@dataclass
class GenerationReport:
    """Every runtime's points and accuracy columns for one model folder."""

    folder: str
    spec: dict[str, Any]
    peak_bandwidth: dict[str, Any]
    results: list[GenerationResult] = field(default_factory=list)
    perplexity: dict[str, dict[str, Any]] = field(default_factory=dict)  # runtime -> Perplexity
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationReport:
        results = [
            GenerationResult(**{**r, "energy": energy.EnergyReport(**r["energy"])})
            if r.get("energy")
            else GenerationResult(**r)
            for r in data.get("results", [])
        ]
        return cls(**{**data, "results": results})
