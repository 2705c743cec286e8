"""A regression check as a queued job: the same configurations on runtime environment A and B.

The spec is stored as the job's spec with kind "regression" (backend/jobs/kinds.py); each
configuration is stored twice, once per side, as an ordinary result whose key says the side and
the environment (side_key), so Compare, exports and profiles read them like any result. One
check may cover several models (models), each configuration of each on both sides; their keys
then name the model too ('a:default:m3:<configuration key>'), while a one-model check keeps the
keys it always had, and a check stored before `models` existed reads as its job's model. B may
run another upload of a single model (model_b): a re-export, or a variant planted to check that
a regression is found. A refusal (unknown environment or model, one not set up, a model named
twice, a bad number) stores nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from backend.auth.actor import current_actor
from backend.errors import UserError
from backend.jobkind import JobKind
from backend.knobs.serialize import from_json, to_json
from backend.reporting import regression_defaults as stats
from backend.runtimeenvs import DEFAULT, ready_env
from backend.runtimes import RUNTIMES
from backend.specs import MEASURE_PRESETS, Configuration, MeasureSettings, Precision

# The stored rows are read and written by the functions that do so: the CLI's parser reads this
# module's declarations, without SQLAlchemy.
if TYPE_CHECKING:
    from storage.repo.jobs import JobRow


KIND = JobKind.REGRESSION.value
SIDES = ("a", "b")
# Rounds of one window per side at least: many short alternations put a busy spell on both
# sides; with only the last two stable windows, an A/A check on a loaded 2-core host said
# "slower" once in six (bench/results/regression_check.txt).
MIN_ROUNDS = 10
# Processes a side is measured in, one A B pair after another: each process has its own offset of
# a few percent (address-space layout, memory placement, which core), fixed for its life; 19 A/A
# checks of one process a side ranged over B/A 0.972-1.031, one said "faster" in CI. Several give
# the interval a spread between processes to see. The interval draws A B pairs (drift of the host
# between pairs cancels), so its ends come from few units: an A/A interval leaves out 1 in about
# half of the checks with 2 pairs, a fifth with 3, 7% with 5 (nominal 5%;
# bench/results/regression_processes.txt), for about 0.4 s more a pair.
PROCESSES = 5
MAX_PROCESSES = 10


@dataclass(frozen=True)
class RegressionSpec:
    """What one regression check measures and how it decides; checks itself."""

    env_b: str
    env_a: str = DEFAULT
    runtime: str = "onnxruntime"  # the runtime both sides run (its version is what changes)
    precisions: tuple[str, ...] = ("fp32",)
    batch_sizes: tuple[int, ...] = (1,)
    dims: tuple[tuple[str, int], ...] = ()  # symbolic input dimensions, e.g. (("seq", 128),)
    threads: int = 0  # 0: the runtime chooses (both sides alike)
    threads_b: int | None = None  # B's own thread count (a cut is a regression to find)
    model_b: int | None = None  # B runs this upload instead of the (single) model
    # the models checked, in order; () in a check stored before several models: the job's model
    models: tuple[int, ...] = ()
    preset: str = "quick"
    measure: MeasureSettings = field(default_factory=lambda: MEASURE_PRESETS["quick"])
    resamples: int = stats.RESAMPLES
    confidence: float = stats.CONFIDENCE
    min_change: float = stats.MIN_CHANGE
    seed: int = stats.SEED
    profile: bool = True
    min_rounds: int = MIN_ROUNDS  # A B rounds at least (time cap permitting), all of them kept
    # processes a side, one A B pair after another, sharing min_rounds and the time cap
    processes: int = PROCESSES
    kind: str = KIND

    def __post_init__(self) -> None:
        # each once: a value given twice would be checked twice under one name
        object.__setattr__(self, "precisions", tuple(dict.fromkeys(self.precisions)))
        batches = dict.fromkeys(int(b) for b in self.batch_sizes)
        object.__setattr__(self, "batch_sizes", tuple(batches))
        object.__setattr__(
            self, "dims", tuple((str(k), int(v)) for k, v in dict(self.dims).items())
        )
        object.__setattr__(self, "models", tuple(int(m) for m in self.models))
        twice = sorted({m for m in self.models if self.models.count(m) > 1})
        if twice:
            raise UserError(f"Model {twice[0]} is named twice; name each model once.")
        if self.model_b is not None and len(self.models) > 1:
            raise UserError(
                "B's own model (--model-b) pairs one model with another upload; check several "
                "models without it, or one model with it."
            )
        if self.runtime not in RUNTIMES:
            raise UserError(f"Unknown runtime {self.runtime!r}; choose from {', '.join(RUNTIMES)}.")
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
        if self.seed < 0:  # numpy's generator takes none (a ValueError in the worker)
            raise UserError(f"The seed must be 0 or more, not {self.seed}.")
        if not 1 <= self.processes <= MAX_PROCESSES:
            raise UserError(
                f"Processes must be between 1 and {MAX_PROCESSES}, not {self.processes}."
            )

    def process_rounds(self) -> int:
        """The A B rounds each process times at least: min_rounds shared out, rounded up."""
        return -(-self.min_rounds // self.processes)

    def process_measure(self) -> MeasureSettings:
        """Each process's measurement: the time cap shared out between the processes."""
        return replace(self.measure, max_seconds=self.measure.max_seconds / self.processes)

    def configurations(self) -> list[Configuration]:
        """Every (precision, batch) pair on the spec's runtime on the CPU with its threads; B's
        the same."""
        return [
            Configuration(
                backend=self.runtime,
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
            return replace(config, intra_op_threads=self.threads_b)
        return config

    def env_of(self, side: str) -> str:
        return self.env_a if side == "a" else self.env_b

    def model_ids(self, job_model: int) -> tuple[int, ...]:
        """The models checked, in order: the spec's, or the job's one model (an older check)."""
        return self.models or (job_model,)

    def model_of(self, side: str, model: int) -> int:
        """The upload a side runs for `model`: B's own model_b where the spec gives one."""
        return self.model_b if side == "b" and self.model_b is not None else model

    def keyed_by_model(self) -> bool:
        """Whether stored keys name the model: only where one check covers several."""
        return len(self.models) > 1

    def key_of(self, side: str, model: int, config: Configuration) -> str:
        """The stored result's key of one side of one model's configuration."""
        return side_key(side, self.env_of(side), config, model if self.keyed_by_model() else None)

    def to_dict(self) -> dict[str, Any]:
        """The job's spec as JSON, through the one serializer (backend.knobs.serialize): the
        dimensions as a mapping, as a sweep writes them (checks stored before wrote pairs,
        which read the same)."""
        return to_json(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RegressionSpec:
        """Names this code does not know are dropped (a check queued by newer code); a check
        stored before `processes` measured each side in one process, and reads so."""
        return from_json(cls, {"processes": 1, **data}, strict=False)


class SideKey(NamedTuple):
    """A stored side's key read back; model None: the check's one model (its job's)."""

    side: str
    env: str
    model: int | None
    config: str


_MODEL = re.compile(r"m(\d+):(.+)")


def side_key(side: str, env: str, config: Configuration, model: int | None = None) -> str:
    """'a:default:<configuration key>', or 'a:default:m3:<configuration key>' in a check of
    several models (a configuration key starts with its backend's name, never 'm<digits>:')."""
    return f"{side}:{env}:" + (f"m{model}:" if model is not None else "") + config.key


def split_key(key: str) -> SideKey | None:
    """A side's key read back (either form of side_key), or None for another key."""
    side, _, rest = key.partition(":")
    env, _, config = rest.partition(":")
    if side not in SIDES or not config:
        return None
    named = _MODEL.fullmatch(config)
    if named:
        return SideKey(side, env, int(named.group(1)), named.group(2))
    return SideKey(side, env, None, config)


def submit_regression(
    model: int | Sequence[int],
    spec: RegressionSpec,
    label: str | None = None,
    held_by: str | None = None,
) -> JobRow:
    """Check both environments and every model, then queue one job (its model: the first
    checked); a refusal stores nothing. `model`: one id, or the ids of several models in order.
    held_by: created already claimed by that worker (the terminal running it, create_job)."""
    from backend.models.library import onnx_path
    from storage.repo import jobs as job_store
    from storage.repo import models as model_store

    models = (model,) if isinstance(model, int) else tuple(model)
    if not models:
        raise UserError("Name the model to check: optiboard regress MODEL --env-b NAME.")
    spec = replace(spec, models=models)  # checks: a model named twice, model_b with several
    for name in (spec.env_a, spec.env_b):
        ready_env(name)  # one sentence: unknown, or not set up (with the script to run)
    for mid in dict.fromkeys([*models, *([spec.model_b] if spec.model_b else [])]):
        if model_store.get_model(mid) is None:
            raise UserError(f"There is no model {mid}; list models to see which exist.")
        onnx_path(mid)  # a generative model (a folder of files) in one sentence, nothing queued
    total = 2 * len(spec.configurations()) * len(models)
    label = label or f"regression: {spec.env_a} vs {spec.env_b}" + (
        f", {len(models)} models" if len(models) > 1 else ""
    )
    return job_store.create_job(
        models[0],
        spec.to_dict(),
        total=total,
        label=label,
        submitted_by=current_actor(),
        kind=KIND,
        held_by=held_by,
    )
