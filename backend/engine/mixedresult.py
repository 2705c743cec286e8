"""What a mixed-precision search found, and its verdict against plain FP32.

Plain FP32 is always a candidate: it meets any accuracy bound (it is the reference), so a mix is
named best only when it is faster than FP32 by more than the run's own noise (the spread of the
candidates' window medians when they were timed interleaved, backend.engine.interleave, and at
least MIN_GAIN); when it is slower, FP32 is best and the line says by how much; in between, the
line says the difference is within noise rather than naming a winner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.engine.interleave import Interleaved
from backend.errors import UserError
from backend.results import AccuracyReport

METRICS = ("cosine", "top1")
MIN_GAIN = 0.03  # a speed step must be 3% faster to be kept
FP32 = "FP32"


@dataclass(frozen=True)
class AccuracyBound:
    """The least agreement with FP32 a mix must keep: cosine similarity or top-1 agreement."""

    metric: str
    minimum: float

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise UserError(f"Accuracy bound {self.metric!r} is unknown; use cosine or top1.")
        if not 0.0 < self.minimum <= 1.0:
            raise UserError(
                f"An accuracy bound lies in (0, 1], e.g. cosine=0.99, not {self.minimum}."
            )

    @classmethod
    def parse(cls, text: str) -> AccuracyBound:
        """'cosine=0.99' or 'top1=0.98'."""
        metric, _, value = text.partition("=")
        try:
            return cls(metric.strip().lower(), float(value))
        except ValueError as exc:
            raise UserError(f"Write the bound as cosine=0.99 or top1=0.98, not {text!r}.") from exc

    def value(self, report: AccuracyReport) -> float | None:
        return report.cosine_similarity if self.metric == "cosine" else report.top1_agreement

    def met(self, report: AccuracyReport) -> bool:
        """A NaN or infinite output never meets a bound, whatever the finite values agree on."""
        if report.nan_values or report.inf_values:
            return False
        value = self.value(report)
        return value is not None and value >= self.minimum


@dataclass
class MixedStep:
    """One measured candidate: which nodes stayed in FP32, its p50 and its accuracy."""

    fp32_nodes: tuple[str, ...]
    p50_ms: float
    accuracy: AccuracyReport
    meets: bool
    why: str

    @property
    def name(self) -> str:
        """How the verdict names it: 'plain INT8' or 'INT8 with 2 node(s) in FP32'."""
        if not self.fp32_nodes:
            return "plain INT8"
        return f"INT8 with {len(self.fp32_nodes)} node(s) in FP32 ({', '.join(self.fp32_nodes)})"


@dataclass
class MixedSearch:
    bound: AccuracyBound
    fp32_p50_ms: float
    steps: list[MixedStep] = field(default_factory=list)
    timing: Interleaved | None = None  # the final interleaved timing, where there was one
    stability: str = ""  # the stability sentence where the steps were timed apart (queued)
    apart_noise: float = MIN_GAIN  # the spread of their window medians, where timed apart

    @property
    def best(self) -> MixedStep | None:
        """The first step that meets the bound, replaced by a later one only when that is at
        least MIN_GAIN faster: a smaller difference is timing noise, not a reason for FP32."""
        best = None
        for step in self.steps:
            if step.meets and (best is None or step.p50_ms < best.p50_ms * (1 - MIN_GAIN)):
                best = step
        return best

    def key(self, step: MixedStep) -> str:
        """The candidate's name in the interleaved timing: 'step N' as the lines number it (the
        first step with these nodes in FP32)."""
        first = next(i for i, s in enumerate(self.steps) if s.fp32_nodes == step.fp32_nodes)
        return f"step {first}"

    def noise(self, step: MixedStep) -> float:
        """The least relative difference from FP32 that is not noise for this step."""
        if self.timing is None:
            return max(MIN_GAIN, self.apart_noise)
        return max(MIN_GAIN, self.timing.noise(FP32, self.key(step)))

    def winner(self) -> MixedStep | None:
        """The best mix when it beats plain FP32 by more than the noise; None when FP32 is best
        or the difference is within noise (verdict() says which)."""
        best = self.best
        if best is None:
            return None
        return best if self.fp32_p50_ms / best.p50_ms > 1 + self.noise(best) else None

    def lines(self) -> list[str]:
        out = [
            f"FP32 p50 {self.fp32_p50_ms:.3f} ms; bound {self.bound.metric} >= {self.bound.minimum}"
        ]
        for i, step in enumerate(self.steps):
            value = self.bound.value(step.accuracy)
            shown = "n/a" if value is None else f"{value:.4f}"
            out.append(
                f"step {i}: {len(step.fp32_nodes)} node(s) in FP32, p50 {step.p50_ms:.3f} ms "
                f"({self.fp32_p50_ms / step.p50_ms:.2f}x FP32), {self.bound.metric} {shown}, "
                f"{'meets' if step.meets else 'misses'} the bound: {step.why}"
            )
        if self.timing is not None:
            out.append(self.timing.verdict())
        elif self.stability:
            out.append(self.stability)
        return out

    def verdict(self) -> str:
        """The best candidate, plain FP32 included, or that the difference is within noise."""
        best = self.best
        if best is None:
            return "best: FP32: no INT8 mix met the bound"
        speed = self.fp32_p50_ms / best.p50_ms
        noise = self.noise(best)
        plain = self.steps[0] if self.steps and not self.steps[0].fp32_nodes else None
        plain_note = (
            f"; plain INT8 ran at {self.fp32_p50_ms / plain.p50_ms:.2f}x FP32's speed"
            if plain is not None and plain is not best
            else ""
        )
        if speed > 1 + noise:
            return (
                f"best: {best.name}, p50 {best.p50_ms:.3f} ms, {speed:.2f}x faster than FP32 "
                f"(p50 {self.fp32_p50_ms:.3f} ms){plain_note}"
            )
        if speed < 1 - noise:
            return (
                f"best: FP32, p50 {self.fp32_p50_ms:.3f} ms: no INT8 mix meeting the bound was "
                f"faster; the fastest, {best.name}, ran at {speed:.2f}x FP32's speed "
                f"({(1 - speed):.0%} slower){plain_note}"
            )
        return (
            f"no clear winner: {best.name} (p50 {best.p50_ms:.3f} ms) and FP32 (p50 "
            f"{self.fp32_p50_ms:.3f} ms) are {abs(speed - 1):.1%} apart, within this run's "
            f"noise of {noise:.1%}; rerun on a quieter machine or with --preset thorough"
        )
