"""The recommendation's vocabulary: a measured variant, a candidate configuration, the evidence
for its rate under the bound (predicted, and measured where confirmed) and the answer.

recommend.py fills them in and phrasing.py words them; both import these, not each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from backend.pricing import Price
from backend.serving.types import BatchingPolicy, LatencyCurve, LoadPoint, LoadSpec
from backend.specs import Precision


@dataclass(frozen=True)
class MeasuredVariant:
    """One optimized model variant and its measured latency-vs-batch curve: what the ranking
    weighs (engine.variants.Variant is the built file; study.ServedVariant a study's file)."""

    precision: str
    provider: str
    curve: LatencyCurve
    model_path: str = ""  # the ONNX file a real server would load (needed to confirm)
    target: str = ""  # the cluster target its sweep ran on; empty: this machine
    runtime: str = "onnxruntime"
    price: Price | None = None  # per hour of its hardware (backend.pricing); None: not priced
    # False: its files have the batch size baked in (a fixed-shape sweep), so Triton cannot
    # stack requests (repository.plan_model serves such a file as a fixed-batch server)
    batchable: bool = True
    # what the curve rests on, in words, for the sentence ("" where it was measured on Triton)
    rests_on: str = ""
    # where its server costs come from when a serving study measured them (servercosts.py),
    # else "" and, for a sweep's curve, the one action that would measure them (`remedy`)
    costs_from: str = ""
    remedy: str = ""
    # which file a server would load, in words ("the uploaded model"), and why it may batch or
    # not, as a clause ("its batch axis is dynamic"); "" where nobody said (phrasing.serves)
    served_file: str = ""
    batching_why: str = ""
    # the batch sizes whose sweep measurement was unstable (windows disagreed, calls stalled):
    # a configuration resting on one says so (phrasing.unstable_inputs); () where none, or where
    # its curve was measured on Triton instead
    unstable_batches: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        try:
            precision = Precision(self.precision).label
        except ValueError:
            precision = self.precision
        runtime = "" if self.runtime == "onnxruntime" else f"{self.runtime} "
        where = f" @ {self.target}" if self.target else ""
        return f"{runtime}{precision} on {self.provider.upper()}{where}"


@dataclass(frozen=True)
class Candidate:
    """A configuration to serve: a variant and a batching policy."""

    variant: MeasuredVariant
    policy: BatchingPolicy

    @property
    def label(self) -> str:
        return f"{self.variant.label}, {self.policy.label}"

    @property
    def unstable_inputs(self) -> tuple[int, ...]:
        """The unstable batch sizes of its variant that its prediction rests on: every measured
        size up to the largest batch it forms, and the next one its time is interpolated from."""
        largest = self.policy.max_batch_size if self.policy.dynamic_batching else 1
        sizes = self.variant.curve.batch_sizes
        reach = next((s for s in sizes if s >= largest), sizes[-1])
        return tuple(s for s in self.variant.unstable_batches if s <= reach)


@dataclass(frozen=True)
class Trial:
    """What `confirm` is asked to measure: this candidate under this load."""

    candidate: Candidate
    load: LoadSpec


Confirm = Callable[[Trial], LoadPoint]


@dataclass(frozen=True)
class Evidence:
    """A candidate's best rate under the bound, predicted and (for the best few) measured."""

    candidate: Candidate
    rate_rps: float  # highest predicted Server rate meeting the bound; 0 when none does
    predicted: LoadPoint  # at rate_rps (or at the lightest probed rate when none meets)
    measured: LoadPoint | None = None
    asked_rps: float = 0.0  # the Server rate the confirmation asked for
    expected: LoadPoint | None = None  # the prediction at the load really measured
    # True: the predicted rate is capped by the server's saturation (the next rate tried made
    # its queue grow), not by the bound: the p99 there may sit far below it
    saturated: bool = False

    @property
    def share(self) -> float:
        """The share of the asked rate the measurement ran at (1.0: as asked; less: the load
        generator fell back to a lower rate); 1.0 when nothing was measured."""
        if self.measured is None or not self.asked_rps:
            return 1.0
        return round((self.measured.spec.target_rps or 0.0) / self.asked_rps, 2)

    @property
    def basis(self) -> str:
        """How its rate was obtained, in words; two rates are compared only on the same basis."""
        if self.measured is None:
            return "predicted"
        if self.measured.generator_saturated:
            return "measured with the load generator behind"
        return f"measured at {self.share:.0%} of the rate asked"

    @property
    def point(self) -> LoadPoint:
        """The measurement when there is one, else the prediction."""
        return self.measured or self.predicted

    @property
    def rate(self) -> float:
        """Its one rate, quoted everywhere (sentence, tables, cost): the rate achieved at its
        point, measured where it was confirmed, else predicted; 0 when no rate meets the bound.
        (rate_rps is the offered rate the bisection found, an input of that point.)"""
        if self.measured is None and self.rate_rps <= 0:
            return 0.0
        return self.point.achieved_rps

    def meets(self, slo_p99_ms: float, min_rps: float) -> bool:
        """Within the bound: a predicted point in steady state, or a server measurement the
        generator kept up with (perf_analyzer's window verdict is shown, not required: on a
        shared host it flaps with the neighbours while the p99 is what the bound is about),
        also where the prediction said no rate meets it (the closest confirmed anyway)."""
        point = self.point
        steady = not point.generator_saturated if self.measured else point.stable
        return (
            (self.rate_rps > 0 or self.measured is not None)  # measured: the server's answer
            and steady
            and point.latency.p99 <= slo_p99_ms
            and point.achieved_rps >= min_rps
        )


@dataclass(frozen=True)
class Recommendation:
    """The answer, its sentence and the evidence behind it (best first)."""

    slo_p99_ms: float
    min_rps: float
    best: Evidence | None
    closest: Evidence | None  # when nothing meets the bound: the lowest p99 seen
    default: Evidence | None  # no dynamic batching, one instance, on the best's variant
    measurements: int
    configurations: int
    ranked: list[Evidence] = field(default_factory=list)
    sentence: str = ""  # verdict and details as one paragraph (the CLI's)
    verdict: str = ""  # the answer in one sentence (the Serve page's box)
    details: tuple[str, ...] = ()  # what it rests on, one sentence each (the page's list)
    asked: tuple[BatchingPolicy, ...] = ()  # the policy grid, before each variant's limits
    # True: no configuration was predicted to meet the bound, so the closest were confirmed
    confirmed_closest: bool = False

    def rate_under_bound(self, evidence: Evidence) -> float | None:
        """The rate a table quotes "under the bound": None for a configuration whose point does
        not meet it (a confirmation measured p99 23 ms against a 5 ms bound showed its 285
        req/s there, and its cost beside it)."""
        return evidence.rate if evidence.meets(self.slo_p99_ms, self.min_rps) else None
