"""What the Serve page shows, in one call: curves from stored sweeps, recommendation, chart data,
and (study_view) the points a serving study measured on Triton with their predictions beside.

A study's predictions simulate each measured load from its variant's cost measurement on the same
Triton server (serving.costmodel, stored by the worker once per variant): every input measured,
none fitted to a measured point, so each prediction is judged against a point it never saw. The
measured costs are captioned beside the chart as the evidence.

The latency-vs-batch curve of each variant comes from a finished Optimize sweep (sweepcurves.py:
median per-call latency at each batch size, in-process ONNX Runtime), unless a finished serving
study measured the same file's costs on the server of the same host (servercosts.py): then that
cost curve is simulated. Without one, the per-request overhead and the server's cost per
execution, which an in-process sweep never pays, are user settings, and the sentence says so.

Why long: both of the Serve page's views (predicted and measured) with their tables, each the
one call the page makes, read together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from backend.counts import counted
from backend.errors import UserError
from backend.pricing import Prices, or_default, price_for
from backend.records import JobRow, is_serving
from backend.reporting import frames
from backend.reporting.cost import reprice
from backend.serving.cheapest import CostAnswer, evidence_cost, recommendation_cost, study_cost
from backend.serving.export import exported_name, perf_analyzer_command
from backend.serving.phrasing import batching_differs, serves, unstable_input
from backend.serving.recommend import Evidence, MeasuredVariant, Recommendation, recommend
from backend.serving.repository import FIXED_BATCH_NOTE
from backend.serving.servercosts import remedy, series_costs
from backend.serving.simulate import RANKING_REQUESTS, simulate
from backend.serving.study import (
    ServedVariant,
    ServingStudy,
    configuration_label,
    cost_key,
    load_label,
    study_points,
)
from backend.serving.sweepcurves import variants_from_results
from backend.serving.types import (
    CPU_ENERGY_NOTE,
    BatchingPolicy,
    LatencyCurve,
    LoadPoint,
    LoadSpec,
    Scenario,
)
from backend.specs import MEASURE_PRESETS, MeasureSettings
from storage.repo import jobs as job_store

CURVE_RATES = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 0.97)  # fractions of a candidate's capacity
SHOWN = 4  # configurations drawn besides the default
TABLE_ROWS = 10  # configurations the evidence table lists, best first


@dataclass(frozen=True)
class ServeView:
    """The recommendation and, per shown configuration, its throughput-vs-p99 curve."""

    recommendation: Recommendation
    variants: list[MeasuredVariant]
    curves: dict[str, list[LoadPoint]]  # configuration label -> points, rate ascending
    chosen: dict[str, LoadPoint]  # configuration label -> the point the sentence quotes
    cost: CostAnswer | None = None  # the cheapest configuration meeting the bound
    model_name: str = ""  # the Triton model `serve export` writes for the sweep's model

    def reproduce(self, point: LoadPoint) -> str:
        """The perf_analyzer line for a predicted point, against the exported model."""
        return perf_analyzer_command(self.model_name, point.spec)

    @property
    def chart_caption(self) -> str:
        """Which configurations the chart draws, where it leaves some to the table: the
        sentence counts them all."""
        rec = self.recommendation
        total = len(rec.ranked)
        if len(self.curves) >= total:
            return ""
        drawn = min(SHOWN, total)
        default = rec.default
        if default is None or default in rec.ranked[:SHOWN]:
            also = " (the default among them)" if default is not None else ""
        else:
            also = f" and the default, {default.candidate.label}"
        listed = f"all {total}" if total <= TABLE_ROWS else f"the best {TABLE_ROWS}"
        return (
            f"The chart draws the best {drawn} of the {total} configurations{also}; the "
            f"evidence table below lists {listed}."
        )


def _curve_points(evidence: Evidence, seed: int) -> list[LoadPoint]:
    """Predicted points from light load to near capacity: one line on the chart."""
    curve, policy = evidence.candidate.variant.curve, evidence.candidate.policy
    capacity = simulate(
        curve, LoadSpec(Scenario.OFFLINE, seed=seed), policy, requests=RANKING_REQUESTS
    ).achieved_rps
    return [
        simulate(
            curve,
            LoadSpec(Scenario.SERVER, target_rps=capacity * f, seed=seed),
            policy,
            requests=RANKING_REQUESTS,
        )
        for f in CURVE_RATES
    ]


def serve_view(
    job_id: int,
    slo_p99_ms: float,
    min_rps: float = 0.0,
    overhead_ms: float = 0.3,
    execution_ms: float = 0.1,
    seed: int = 0,
    prices: Prices = (),
) -> ServeView:
    """Recommend a serving configuration for a finished sweep and gather what the page draws;
    `prices` (an override) prices it instead of the sweep's stored prices."""
    if overhead_ms < 0 or execution_ms < 0:
        raise UserError("Overheads cannot be negative; use 0 or more milliseconds.")
    if min_rps < 0:
        raise UserError(
            f"The required rate cannot be negative, not {min_rps:g} req/s; 0 asks none."
        )
    frame = frames.results_frame([job_id])
    if prices:
        frame = reprice(frame, prices)
    # a finished study's server costs for the same file and host, else the sweep's (servercosts)
    costs, fix = series_costs(job_id, frame), remedy(job_id, slo_p99_ms, frame)
    variants = variants_from_results(frame, overhead_ms, execution_ms, costs, fix)
    if not variants:
        raise UserError(
            f"Job #{job_id} has no measured latency yet; pick a finished sweep with results."
        )
    rec = recommend(variants, slo_p99_ms, min_rps=min_rps, seed=seed)
    shown = rec.ranked[:SHOWN]
    if rec.default is not None and rec.default not in shown:
        shown.append(rec.default)
    curves = {e.candidate.label: _curve_points(e, seed) for e in shown}
    chosen = {e.candidate.label: e.point for e in shown}
    model = frame["model_id"].iloc[0]  # a sweep is of one model; None: its job is gone
    name = exported_name(int(model) if pd.notna(model) else 0)
    return ServeView(rec, variants, curves, chosen, recommendation_cost(rec), name)


COST_HEADER = "$ per M inferences"  # short: the page's column help says at which rate
RATE_HEADER = "rate under the bound (req/s)"
UNSTABLE_HEADER = "rests on an unstable sweep measurement at"


def evidence_table(view: ServeView) -> pd.DataFrame:
    """The ten best configurations the recommendation ranked, measured or predicted, each with
    the file it serves (and why it batches or not, where they differ: phrasing.serves) and the
    unstable sweep measurements it rests on, if any."""
    rows, differs = [], batching_differs(view.variants)
    rec = view.recommendation
    for evidence in rec.ranked[:TABLE_ROWS]:
        point, rate = evidence.point, rec.rate_under_bound(evidence)
        rows.append(
            {
                "configuration": evidence.candidate.label,
                RATE_HEADER: None if rate is None else round(rate),
                "p50 (ms)": round(point.latency.p50, 2),
                "p99 (ms)": round(point.latency.p99, 2),
                "queue (ms)": round(point.queue_ms, 2),
                "compute (ms)": round(point.compute_ms, 2),
                "mean batch": round(point.mean_batch, 1),
                COST_HEADER: None if rate is None else evidence_cost(evidence),
                "source": "measured" if evidence.measured else "predicted",
                UNSTABLE_HEADER: unstable_input(evidence),
                "serves": serves(evidence.candidate.variant, differs),
            }
        )
    return pd.DataFrame(rows)


# --- measured serving studies (backend/serving/study.py, run by the worker on Triton) ---


@dataclass(frozen=True)
class MeasuredConfiguration:
    """One server configuration of a study: its measured points, and the same loads predicted
    by the batcher simulation from its variant's cost measurement on the server."""

    label: str
    measured: list[LoadPoint]
    predicted: list[LoadPoint]
    point_ids: list[int] = field(default_factory=list)  # each measured point's stored id

    @property
    def notes(self) -> list[str]:
        """What the server did differently from the ask (why dynamic batching was impossible),
        said by every one of its points; a note of one point (a busy host) stays with it."""
        if not self.measured:
            return []
        shared = set.intersection(*(set(p.notes) for p in self.measured)) - {CPU_ENERGY_NOTE}
        return [n for n in self.measured[0].notes if n in shared]

    @property
    def best(self) -> LoadPoint | None:
        """The highest measured rate among the points that are stable and were not limited by
        the load generator (those say nothing about the server)."""
        usable = [p for p in self.measured if p.stable and not p.generator_saturated]
        return max(usable, key=lambda p: p.achieved_rps, default=None)


@dataclass(frozen=True)
class VariantCosts:
    """A variant's measured simulation inputs, as the caption under the chart states them."""

    variant: str
    curve: LatencyCurve

    @property
    def caption(self) -> str:
        return f"{self.variant}, measured on Triton: {self.curve.summary}"


@dataclass(frozen=True)
class StudyView:
    """What the Serve page draws for one serving study, measured and predicted apart."""

    job_id: int
    slo_p99_ms: float
    planned: int
    configurations: list[MeasuredConfiguration]
    sentence: str
    meets: bool
    costs: list[VariantCosts] = field(default_factory=list)
    prediction_note: str = ""  # why nothing is predicted, when nothing is
    cost: CostAnswer | None = None  # the cheapest measured configuration meeting the bound
    measure: str = "quick"  # the MEASURE_PRESETS name its points were judged stable by
    model_name: str = ""  # the Triton model `serve export` writes for the study's model

    @property
    def notes(self) -> list[str]:
        """Each configuration's notes, named by it: shown beside its points."""
        return [f"{c.label}: {note}" for c in self.configurations for note in c.notes]

    def reproduce(self, point: LoadPoint) -> str:
        """The perf_analyzer line for one of its points, under the stability rule that judged it."""
        return perf_analyzer_command(self.model_name, point.spec, measure=self.settings)

    @property
    def settings(self) -> MeasureSettings:
        return MEASURE_PRESETS[self.measure]

    @property
    def prediction_captions(self) -> list[str]:
        """What the page writes under the chart: the note, else each variant's measured costs."""
        return [self.prediction_note] if self.prediction_note else [c.caption for c in self.costs]

    @property
    def measurements(self) -> int:
        return sum(len(c.measured) for c in self.configurations)

    @property
    def curves(self) -> dict[str, list[LoadPoint]]:
        """Per configuration, measured and predicted points by rate (the chart's lines)."""
        return {
            c.label: sorted(c.measured, key=lambda p: p.achieved_rps)
            + sorted(c.predicted, key=lambda p: p.achieved_rps)
            for c in self.configurations
        }

    @property
    def point_labels(self) -> dict[int, str]:
        """Each measured point's stored id and its name, "configuration | load", table order."""
        return {
            point_id: f"{c.label} | {load_label(p.spec)}"
            for c in self.configurations
            for point_id, p in zip(c.point_ids, c.measured, strict=True)
        }

    def shown_point(self, label: str) -> LoadPoint | None:
        """Its split's and histogram's point: its best, else its last the client kept up with."""
        chosen = next((c for c in self.configurations if c.label == label), None)
        if chosen is None or not chosen.measured:
            return None
        served = [p for p in chosen.measured if not p.generator_saturated]
        return chosen.best or (served[-1] if served else None)


def predicted_points(curve: LatencyCurve, measured: list[LoadPoint]) -> list[LoadPoint]:
    """Each measured load as the simulation predicts it from the measured cost curve (no fitting:
    the measured points are only judged against)."""
    return [
        simulate(curve, p.spec, p.policy, requests=RANKING_REQUESTS, senders=p.generator_processes)
        for p in measured
    ]


def _study_sentence(configurations: list[MeasuredConfiguration], slo: float) -> tuple[str, bool]:
    """Model Analyzer's summary over what was measured: who meets the bound, at what rate."""
    count = sum(len(c.measured) for c in configurations)
    if not count:
        return "No load point is measured yet; this page fills in as the worker stores them.", False
    head = (
        f"In {counted(count, 'measurement')} across {counted(len(configurations), 'configuration')}"
    )
    meeting = [
        (c, p)
        for c in configurations
        for p in c.measured
        if p.stable and not p.generator_saturated and p.latency.p99 <= slo
    ]
    if meeting:
        config, point = max(meeting, key=lambda cp: cp[1].achieved_rps)
        return (
            f"{head}, {config.label} meets the p99 bound of {slo:g} ms at "
            f"{point.achieved_rps:,.0f} req/s (p99 {point.latency.p99:.2f} ms).",
            True,
        )
    miss = f"{head}, none meets the p99 bound of {slo:g} ms"
    # a point the load generator could not keep up with timed the client, not the server: its
    # latency is never quoted as the server's (docs/serving.md)
    served = [(c, p) for c in configurations for p in c.measured if not p.generator_saturated]
    if not served:
        return (
            f"{miss}, and none says how the server does: at every point the load generator "
            "could not offer the rate on this host (client saturated), so those latencies are "
            "the client's, not a server measurement; measure lower rates or fewer in flight.",
            False,
        )
    config, closest = min(served, key=lambda cp: cp[1].latency.p99)
    unstable = "" if closest.stable else ", its windows unstable"
    saturated = count - len(served)
    left_out = (
        f" ({saturated} point{'s' if saturated > 1 else ''} with the client saturated left out: "
        "not server measurements)"
        if saturated
        else ""
    )
    return (
        f"{miss}; the lowest p99 measured is {closest.latency.p99:.2f} ms at "
        f"{closest.achieved_rps:,.0f} req/s ({config.label}{unstable}){left_out}.",
        False,
    )


def study_of(job_id: int) -> ServingStudy:
    """The study a job holds (its SLO is the page's default bound)."""
    return ServingStudy.from_dict(_study_job(job_id).spec)


def _study_job(job_id: int) -> JobRow:
    """The serving study's job row, or one sentence where the job is none."""
    job = job_store.get_job(job_id)
    if job is None or not is_serving(job):
        raise UserError(f"Job #{job_id} is not a serving study; pick one from the list.")
    return job


def _prediction_note(study: ServingStudy, measured: bool, old_curves: int) -> str:
    """Why a study with points shows no predictions ("" when it does, or will)."""
    if measured:
        return ""
    if old_curves:
        return (
            "This study was measured before predictions came from a cost measurement on the "
            "server; queue it again to see predictions beside its points."
        )
    if not study.curve_sizes:
        return (
            "This study asked for no cost measurement, so nothing is predicted beside its points."
        )
    return ""


def study_view(job_id: int, slo_p99_ms: float | None = None, prices: Prices = ()) -> StudyView:
    """The stored points of a serving study (as far as it has come), with predictions; priced
    by `prices` (an override), else by the study's stored prices."""
    job = _study_job(job_id)
    study = ServingStudy.from_dict(job.spec)
    table = prices or or_default(study.prices)
    slo = slo_p99_ms or study.slo_p99_ms
    stored = study_points(job_id)
    asked = {configuration_label(v, p): (v, p) for v in study.variants for p in study.policies}
    configurations = []
    for label, points in stored.by_configuration.items():
        variant, policy = asked.get(label, (None, None))
        curve = stored.costs.get(cost_key(variant)) if variant else None
        predicted = predicted_points(curve, points) if curve is not None else []
        shown = ran_label(variant, policy, points) if variant and policy else label
        ids = stored.ids.get(label, [])
        configurations.append(MeasuredConfiguration(shown, points, predicted, ids))
    costs = [
        VariantCosts(v.name, stored.costs[cost_key(v)])
        for v in study.variants
        if cost_key(v) in stored.costs
    ]
    sentence, meets = _study_sentence(configurations, slo)
    note = _prediction_note(study, bool(costs), stored.old_curves) if stored.points else ""
    price = price_for(table, study.provider.value)
    cost = study_cost({c.label: c.measured for c in configurations}, slo, price)
    return StudyView(
        job_id,
        slo,
        study.point_count,
        configurations,
        sentence,
        meets,
        costs,
        note,
        cost,
        study.measure,
        exported_name(job.model_id),
    )


def ran_label(variant: ServedVariant, asked: BatchingPolicy, points: list[LoadPoint]) -> str:
    """The configuration as it really ran: a file whose batch size is fixed was served without
    dynamic batching whatever was asked (repository.plan_model), and its points say so."""
    served = points[0].policy if points else asked
    if served == asked:
        return configuration_label(variant, asked)
    fixed = any(n.startswith(FIXED_BATCH_NOTE) for p in points for n in p.notes)
    ran = (
        f"fixed batch {served.max_batch_size}, x{served.instance_count}" if fixed else served.label
    )
    return f"{variant.name} · {ran} (asked: {asked.label})"


def measured_table(view: StudyView) -> pd.DataFrame:
    """One row per measured point, its prediction beside it (labelled), for the evidence table."""
    rows = []
    for config in view.configurations:
        predictions = config.predicted or [None] * len(config.measured)
        for point, predicted in zip(config.measured, predictions, strict=True):
            rows.append(
                {
                    "configuration": config.label,
                    "load": load_label(point.spec),
                    "req/s": round(point.achieved_rps, 1),
                    "p50 (ms)": round(point.latency.p50, 2),
                    "p90 (ms)": round(point.latency.p90, 2),
                    "p99 (ms)": round(point.latency.p99, 2),
                    "queue (ms)": round(point.queue_ms, 2),
                    "compute (ms)": round(point.compute_ms, 2),
                    "mean batch": round(point.mean_batch, 1),
                    "J/request": point.energy.j_p50 if point.energy else None,
                    "idle W": point.energy.idle_w if point.energy else None,
                    # what measured the two figures, or why they are blank (a sweep's CSV too)
                    "energy source": point.energy.source if point.energy else None,
                    "verdict": "client saturated"
                    if point.generator_saturated
                    else point.stability_note.split(":")[0],
                    "predicted req/s": round(predicted.achieved_rps, 1) if predicted else None,
                    "predicted p99 (ms)": round(predicted.latency.p99, 2) if predicted else None,
                    "seed": point.spec.seed,
                    "senders": point.generator_processes,
                }
            )
    return pd.DataFrame(rows)


def energy_sources(view: StudyView) -> list[str]:
    """What measured the points' energy, or why it could not be, once each."""
    points = [p for config in view.configurations for p in config.measured]
    return sorted({p.energy.source for p in points if p.energy is not None})
