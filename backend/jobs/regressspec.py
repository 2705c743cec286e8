"""A regression check as a queued job: the same configurations on runtime environment A and B.

The spec is stored as the job's spec with kind "regression" (backend/jobs/kinds.py); each
configuration is stored twice, once per side, as an ordinary result whose key says the side and
the environment (side_key), so Compare, exports and profiles read them like any result. B may
run another upload of the same model (model_b): a re-export, or a variant planted to check that
a regression is found. A refusal (unknown environment, one not set up, a bad number) stores
nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from backend.auth.audit import current_actor
from backend.errors import UserError
from backend.records import JobKind
from backend.reporting import regression as stats
from backend.runtimeenvs import DEFAULT, ready_env
from backend.specs import MEASURE_PRESETS, Configuration, MeasureSettings, Precision
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo.jobs import JobRow

KIND = JobKind.REGRESSION.value
SIDES = ("a", "b")
# Rounds of one window per side at least: many short alternations put a busy spell on both
# sides; with only the last two stable windows, an A/A check on a loaded 2-core host said
# "slower" once in six (bench/results/regression_check.txt).
MIN_ROUNDS = 10


@dataclass(frozen=True)
class RegressionSpec:
    """What one regression check measures and how it decides; checks itself."""

    env_b: str
    env_a: str = DEFAULT
    precisions: tuple[str, ...] = ("fp32",)
    batch_sizes: tuple[int, ...] = (1,)
    dims: tuple[tuple[str, int], ...] = ()  # symbolic input dimensions, e.g. (("seq", 128),)
    threads: int = 0  # 0: the runtime chooses (both sides alike)
    threads_b: int | None = None  # B's own thread count (a cut is a regression to find)
    model_b: int | None = None  # B runs this upload instead of the job's model
    preset: str = "quick"
    measure: MeasureSettings = field(default_factory=lambda: MEASURE_PRESETS["quick"])
    resamples: int = stats.RESAMPLES
    confidence: float = stats.CONFIDENCE
    min_change: float = stats.MIN_CHANGE
    seed: int = stats.SEED
    profile: bool = True
    min_rounds: int = MIN_ROUNDS  # A B rounds at least (time cap permitting), all of them kept
    kind: str = KIND

    def __post_init__(self) -> None:
        if isinstance(self.measure, dict):
            object.__setattr__(self, "measure", MeasureSettings(**self.measure))
        object.__setattr__(self, "precisions", tuple(self.precisions))
        object.__setattr__(self, "batch_sizes", tuple(int(b) for b in self.batch_sizes))
        object.__setattr__(
            self, "dims", tuple((str(k), int(v)) for k, v in dict(self.dims).items())
        )
        if not self.precisions or not self.batch_sizes:
            raise UserError("A regression check needs at least one precision and batch size.")
        for name in self.precisions:
            try:
                Precision(name)
            except ValueError:
                raise UserError(
                    f"Unknown precision {name!r}; choose from "
                    f"{', '.join(p.value for p in Precision)}."
                ) from None
        if not 100 <= self.resamples <= 100_000:
            raise UserError(f"Resamples must be between 100 and 100000, not {self.resamples}.")
        if not 0.5 <= self.confidence < 1:
            raise UserError(f"Confidence must be in [0.5, 1), e.g. 0.95, not {self.confidence}.")
        if not 1 <= self.min_rounds <= 1000:
            raise UserError(f"Rounds must be between 1 and 1000, not {self.min_rounds}.")
        if not 0 <= self.min_change < 1:
            raise UserError(f"The smallest change must be in [0, 1), not {self.min_change}.")

    def configurations(self) -> list[Configuration]:
        """Every (precision, batch) pair on the CPU with the spec's threads; B's the same."""
        return [
            Configuration(
                precision=Precision(p),
                batch_size=b,
                intra_op_threads=self.threads,
                symbolic_dims=self.dims,
            )
            for p in self.precisions
            for b in self.batch_sizes
        ]

    def side_configuration(self, config: Configuration, side: str) -> Configuration:
        """B's configuration: A's, with B's own thread count when the spec gives one."""
        if side == "b" and self.threads_b is not None:
            from dataclasses import replace

            return replace(config, intra_op_threads=self.threads_b)
        return config

    def env_of(self, side: str) -> str:
        return self.env_a if side == "a" else self.env_b

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RegressionSpec:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def side_key(side: str, env: str, config: Configuration) -> str:
    """The stored result's key of one side: 'a:default:<configuration key>'."""
    return f"{side}:{env}:{config.key}"


def split_key(key: str) -> tuple[str, str, str] | None:
    """(side, environment, configuration key) of a side's key, or None for another key."""
    side, _, rest = key.partition(":")
    env, _, config = rest.partition(":")
    return (side, env, config) if side in SIDES and config else None


def submit_regression(model_id: int, spec: RegressionSpec, label: str | None = None) -> JobRow:
    """Check both environments and models, then queue one job; a refusal stores nothing."""
    for name in (spec.env_a, spec.env_b):
        ready_env(name)  # one sentence: unknown, or not set up (with the script to run)
    for mid in {model_id, spec.model_b or model_id}:
        if model_store.get_model(mid) is None:
            raise UserError(f"There is no model {mid}; list models to see which exist.")
    total = 2 * len(spec.configurations())
    label = label or f"regression: {spec.env_a} vs {spec.env_b}"
    return job_store.create_job(
        model_id, spec.to_dict(), total=total, label=label, submitted_by=current_actor()
    )
