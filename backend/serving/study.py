"""A serving study: the job kind that measures variants x batching policies x loads on Triton.

Stored as a job's spec (with "kind": "serving", which sweeps do not have), claimed by the worker
like a sweep, run by backend/jobs/serving.py; each load point is stored as it lands
(storage/repo/serving.py), after each variant's cost measurement on the server (its simulation
inputs, stored once per variant). Keys name a point by variant, policy and load, and a cost
measurement by variant, so a resumed job skips what is already stored.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from backend import pricing
from backend.auth import caps
from backend.auth.actor import current_actor
from backend.commas import comma_numbers
from backend.errors import UserError
from backend.jobkind import JobKind
from backend.knobs import knob
from backend.runtimeenvs import DEFAULT, env_knob, get_env, ready_env
from backend.serving import runtime_overlay
from backend.serving.scenarios import OFFLINE_DEFAULT_REQUESTS
from backend.serving.types import (
    BatchingPolicy,
    LatencyCurve,
    LoadPoint,
    LoadSpec,
    Scenario,
    ServingProvider,
    shortest_queue_delay_us,
)
from backend.specs import MEASURE_PRESETS, check_threads

# The stored rows are read and written by the functions that do so: the CLI's parser reads this
# module's declarations, without SQLAlchemy.
if TYPE_CHECKING:
    from storage.repo.jobs import JobRow


KIND = JobKind.SERVING.value
ORIGINAL = "original"
CURVE_SIZES = (1, 2, 4, 8, 16)  # batch sizes whose costs each variant measures, for predictions


@dataclass(frozen=True)
class ServedVariant:
    """One ONNX file of the model to serve: the upload itself or an optimized variant."""

    sha256: str = ""  # "" is the model as uploaded
    name: str = ORIGINAL

    @property
    def key(self) -> str:
        return self.sha256[:12] or ORIGINAL


def load_label(load: LoadSpec) -> str:
    """A load as people say it: "8 in flight", "200 req/s", "bursts of 64", "1 at a time"."""
    if load.scenario is Scenario.SERVER:
        return f"{load.target_rps:g} req/s"
    if load.scenario is Scenario.OFFLINE:
        return f"bursts of {load.requests or OFFLINE_DEFAULT_REQUESTS}"
    if load.scenario is Scenario.SINGLE_STREAM:
        return "1 at a time"
    return f"{load.concurrency} in flight"


def configuration_label(variant: ServedVariant, policy: BatchingPolicy) -> str:
    return f"{variant.name} · {policy.label}"


def point_key(variant: ServedVariant, policy: BatchingPolicy, load: LoadSpec) -> str:
    return f"{variant.key}|{policy.label}|{load.scenario.value}:{load_label(load)}"


def cost_key(variant: ServedVariant) -> str:
    return f"{variant.key}|calibration"  # stored keys keep the first name


@dataclass(frozen=True)
class ServingStudy:
    """What an editor asks for: every variant served under every policy at every load."""

    variants: tuple[ServedVariant, ...]
    policies: tuple[BatchingPolicy, ...]
    loads: tuple[LoadSpec, ...]
    slo_p99_ms: float
    measure: str = "quick"  # a MEASURE_PRESETS name: warm-up and the stability rule
    dims: tuple[tuple[str, int], ...] = ()
    intra_op_threads: int = 0  # 0: the cores shared out among the instances
    curve_sizes: tuple[int, ...] = CURVE_SIZES  # () measures no costs and predicts nothing
    kind: str = field(default=KIND)
    provider: ServingProvider = ServingProvider.CPU  # every configuration's ORT provider
    prices: tuple[tuple[str, float], ...] = ()  # per hour; stamped from the setting when queued
    # whose onnxruntime the served model runs on (backend/serving/runtime_overlay.py)
    runtime_env: str = knob(DEFAULT, **env_knob("whose onnxruntime the served model runs on"))

    def __post_init__(self) -> None:
        if not self.variants or not self.policies or not self.loads:
            raise UserError(
                "A serving study needs at least one variant, one batching policy and one load."
            )
        object.__setattr__(self, "prices", pricing.checked(self.prices) if self.prices else ())
        if not self.slo_p99_ms > 0:
            raise UserError("The p99 bound must be above 0 milliseconds.")
        check_threads(self.intra_op_threads)
        if self.measure not in MEASURE_PRESETS:
            raise UserError(
                f"Unknown measurement {self.measure!r}; use one of {', '.join(MEASURE_PRESETS)}."
            )
        largest = max(load.samples_per_request for load in self.loads)
        small = [p for p in self.policies if p.dynamic_batching and p.max_batch_size < largest]
        if small:
            raise UserError(
                f"Requests of {largest} samples exceed the maximum batch size "
                f"{small[0].max_batch_size}; send fewer samples per request or raise it."
            )
        keys = [
            point_key(v, p, load)
            for v in self.variants
            for p in self.policies
            for load in self.loads
        ]
        if len(set(keys)) != len(keys):
            raise UserError("The study names the same variant, policy and load twice; drop one.")
        get_env(self.runtime_env)  # an unknown name in one sentence; not set up: at submit

    @property
    def cost_sizes(self) -> tuple[int, ...]:
        """curve_sizes up to the largest batch a dynamic policy forms (any policy's when none
        batches): the simulation interpolates only where batches can be."""
        dynamic = [p.max_batch_size for p in self.policies if p.dynamic_batching]
        largest = max(dynamic or [p.max_batch_size for p in self.policies])
        return tuple(s for s in self.curve_sizes if s <= largest) or (1,)

    @property
    def delay_probe_us(self) -> int:
        """The smallest queue delay served (0: none), which the cost measurement probes."""
        return shortest_queue_delay_us(self.policies)

    @property
    def point_count(self) -> int:
        return len(self.variants) * len(self.policies) * len(self.loads)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServingStudy:
        policies = tuple(
            BatchingPolicy(**{**p, "preferred_batch_sizes": tuple(p["preferred_batch_sizes"])})
            for p in data["policies"]
        )
        loads = tuple(
            LoadSpec(**{**ld, "scenario": Scenario(ld["scenario"])}) for ld in data["loads"]
        )
        return cls(
            variants=tuple(ServedVariant(**v) for v in data["variants"]),
            policies=policies,
            loads=loads,
            slo_p99_ms=float(data["slo_p99_ms"]),
            measure=data.get("measure", "quick"),
            dims=tuple((str(k), int(v)) for k, v in data.get("dims", ())),
            intra_op_threads=int(data.get("intra_op_threads", 0)),
            curve_sizes=tuple(data.get("curve_sizes", CURVE_SIZES)),
            provider=ServingProvider(data.get("provider", ServingProvider.CPU)),
            prices=tuple(tuple(pair) for pair in data.get("prices", ())),
            runtime_env=data.get("runtime_env", DEFAULT),
        )


def model_variants(model_id: int) -> list[ServedVariant]:
    """The files a study can serve: the upload, then each optimized variant by file name."""
    from storage.repo import models as model_store

    optimized = [a for a in model_store.list_artifacts(model_id) if a.kind == "optimized"]
    seen: dict[str, ServedVariant] = {}
    for artifact in optimized:
        seen.setdefault(artifact.sha256, ServedVariant(artifact.sha256, artifact.filename))
    return [ServedVariant(), *seen.values()]


def submit_study(model_id: int, study: ServingStudy, label: str | None = None) -> JobRow:
    """Queue the study as one job; a variant that is not this model's is refused first."""
    from storage.repo import jobs as job_store
    from storage.repo import models as model_store

    if model_store.get_model(model_id) is None:
        raise UserError(f"There is no model {model_id}; pick one from the model library.")
    known = {v.sha256 for v in model_variants(model_id)}
    unknown = [v.name for v in study.variants if v.sha256 not in known]
    if unknown:
        raise UserError(
            f"{unknown[0]!r} is not a stored variant of model {model_id}; pick one from its list."
        )
    env = ready_env(study.runtime_env)  # not set up here: one sentence, nothing queued
    if env.root is not None:
        runtime_overlay.pinned_version(env)  # an environment without onnxruntime cannot serve
    label = label or f"serving study, p99 bound {study.slo_p99_ms:g} ms"
    study = replace(study, prices=pricing.or_default(study.prices))  # a link prices it the same
    caps.check_queued()
    return job_store.create_job(
        model_id,
        study.to_dict(),
        total=study.point_count,
        label=label,
        unit="load points",
        submitted_by=current_actor(),
        kind=KIND,
    )


@dataclass(frozen=True)
class StudyPoints:
    """A study's stored measurements, typed: points in the order measured, grouped by
    configuration, each variant's measured cost curve (by cost_key), how many bare curves a
    study stored before cost measurements were kept (they predict nothing), and the stored
    id of each grouped point, in the same order (its samples are read by it)."""

    points: list[LoadPoint]
    by_configuration: dict[str, list[LoadPoint]]
    costs: dict[str, LatencyCurve]
    old_curves: int = 0
    ids: dict[str, list[int]] = field(default_factory=dict)


def study_points(job_id: int) -> StudyPoints:
    from storage.repo import serving as serving_store

    points: list[LoadPoint] = []
    grouped: dict[str, list[LoadPoint]] = {}
    ids: dict[str, list[int]] = {}
    costs: dict[str, LatencyCurve] = {}
    old_curves = 0
    for row in serving_store.list_points([job_id]):
        if row.kind == serving_store.COSTS:
            costs[row.point_key] = LatencyCurve.from_dict(row.payload)
        elif row.kind == serving_store.POINT:
            point = LoadPoint.from_dict(row.payload)
            points.append(point)
            grouped.setdefault(row.configuration, []).append(point)
            ids.setdefault(row.configuration, []).append(row.id)
        elif row.kind == serving_store.OLD_CURVE:
            old_curves += 1
    return StudyPoints(points, grouped, costs, old_curves, ids)


def runtime_labels(points: list[LoadPoint]) -> list[str]:
    """What ran the served model, once each ("onnxruntime 1.31.1 (ort-1.31)")."""
    return sorted({p.runtime_label for p in points if p.runtime_label})


def runtime_line(job: JobRow) -> str:
    """`optiboard show`'s line for a study: the environment it asked for, what its points ran."""
    ran = ", ".join(runtime_labels(study_points(job.id).points)) or "no load point stored yet"
    return f"runtime environment {ServingStudy.from_dict(job.spec).runtime_env}: {ran}"


def study_from_form(
    variants: list[ServedVariant],
    scenario: Scenario,
    levels: str,
    duration_s: float,
    max_batch_size: int,
    delays_us: str,
    instances: str,
    slo_p99_ms: float,
) -> ServingStudy:
    """The study the Serve page's form describes: one policy per delay x instance count, one
    load per level (requests in flight, or req/s for the Server scenario)."""

    if scenario is Scenario.SERVER:
        rates = comma_numbers(levels, float, "Rates") or [100.0]
        loads = [LoadSpec(scenario, duration_s=duration_s, target_rps=r) for r in rates]
    elif scenario is Scenario.CONCURRENCY:
        counts = comma_numbers(levels, int, "Concurrency") or [1]
        loads = [LoadSpec(scenario, duration_s=duration_s, concurrency=c) for c in counts]
    else:
        loads = [LoadSpec(scenario, duration_s=duration_s)]
    policies = [
        BatchingPolicy(
            max_batch_size=max_batch_size, max_queue_delay_us=delay, instance_count=count
        )
        for delay in comma_numbers(delays_us, int, "Queue delays") or [0]
        for count in comma_numbers(instances, int, "Instances") or [1]
    ]
    return ServingStudy(tuple(variants), tuple(policies), tuple(loads), slo_p99_ms)
