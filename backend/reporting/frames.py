"""Results as pandas DataFrames: speedups against a baseline, the Pareto front, and exports.

Pages and charts never see SQL or payload dicts: everything they plot is a column here, read
from typed StoredResults. Exports live in reporting.exports and are re-exported here for callers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from backend.knobs import columns, declared_columns
from backend.pricing import Prices
from backend.records import JobKind
from backend.reporting import cost, distance, metrics
from backend.reporting.cost import add_cost_pareto, job_prices
from backend.reporting.front import add_pareto, add_speedups
from backend.reporting.provenance import hardware, ran_on, software
from backend.results import EnergyReport, LatencyStats, StoredResult
from backend.specs import Configuration, Precision
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.repo.jobs import JobRow

# Labels, units, better directions and formats of the figures below: reporting.metrics.
METRICS = metrics.REGISTRY
# How "accuracy loss" is read from the accuracy report (0 means identical to FP32), by label.
LOSS_METRICS: dict[str, str] = {loss: metrics.loss_label(loss) for loss in metrics.LOSSES}

COLUMNS = [
    "result_id",
    "job_id",
    "model_id",
    "model",
    "job_label",
    "series",
    "label",
    "config_key",
    "backend",
    "provider",
    "precision",
    "batch_size",
    "fixed_shapes",
    "optimization_level",
    "intra_op_threads",
    "simplify",
    "status",
    "error",
    "p50_ms",
    "p90_ms",
    "p95_ms",
    "p99_ms",
    "mean_ms",
    "std_ms",
    "min_ms",
    "max_ms",
    "count",
    "throughput",
    "stable",
    "peak_rss_mb",
    "peak_rss_scope",
    "gpu_memory_mb",
    "model_size_bytes",
    "session_create_ms",
    "first_inference_ms",
    "max_abs_error",
    "mean_rel_error",
    "cosine_similarity",
    "top1_agreement",
    "top1_rows",  # the rows top-1 agreement counts: 1 of 4 is not 250 of 1,000
    "eval_top1_accuracy",  # against the labels of the user's evaluation set
    "eval_top1_agreement",  # with FP32 on the evaluation set's inputs
    "evaluation_set",
    "calibration_set",
    "providers_used",
    "execution_precision",
    "layer_precisions",  # 'i8 12 layers, f32 30': how many layers ran at each precision
    "int8_kernels",  # ONNX Runtime's int8 matmul kernels that ran: u8u8 or u8s8 (runtimes/ort_int8)
    "timing",
    "copy_share",
    "tflops",
    "peak_fraction",
    "mlperf_share",
    "j_per_sample",  # energy: backend/energy, what measured it (or why not) in energy_source
    "j_per_sample_min",
    "j_per_sample_max",
    "j_per_sample_above_idle",
    "active_w",
    "idle_w",
    "energy_source",
    "notes",
    "target",
    "ran_on",  # the host (a cluster's target · host · node)
    "software",  # the runtime and its version, the runtime environment, Python
    "hardware",  # the GPU for a GPU provider, else the CPU and its logical cores
    "replicas",
    *cost.COST_COLUMNS,  # priced by the job's stored prices (reporting.cost)
]
COLUMNS += [c for c in declared_columns(Configuration) if c not in COLUMNS]  # knobs added since


def series_name(job_id: int, model: str, configuration: Configuration) -> str:
    """A configuration family across batch sizes: what a line on a chart is called.

    Only the knobs that differ from Configuration's own defaults are named.
    """
    c, default = configuration, Configuration(precision=configuration.precision)
    parts = [f"#{job_id} {model}", c.provider.upper(), c.precision.label]
    if c.fp32_nodes:  # mixed precision is its own point on every chart
        parts.append(f"mixed ({len(c.fp32_nodes)} in FP32)")
    if c.backend != default.backend:
        parts.append(c.backend)
    if c.fixed_shapes != default.fixed_shapes:
        parts.append("dynamic")
    if c.optimization_level != default.optimization_level:
        parts.append(f"opt={c.optimization_level}")
    if c.intra_op_threads != default.intra_op_threads:
        parts.append(f"{c.intra_op_threads} threads")
    if c.simplify != default.simplify:
        parts.append("simplified")
    parts += c.cuda.key_parts  # GPU knobs and the timing mode are their own lines too
    if c.io_mode != default.io_mode:
        parts.append(c.io_mode.label)
    if c.replicas > 1:
        parts.append(f"x{c.replicas}")
    if c.target:  # the same configuration on another hardware target is another line
        parts.append(f"@ {c.target}")
    if c.symbolic_dims:
        parts.append(",".join(f"{k}={v}" for k, v in c.symbolic_dims))
    return " ".join(parts)


def _latency_columns(latency: LatencyStats | None) -> dict[str, Any]:
    """Every latency column computed from the one stored LatencyStats."""
    names = ("p50", "p90", "p95", "p99", "mean", "std", "min", "max")
    values = {f"{n}_ms": getattr(latency, n) if latency else None for n in names}
    return {**values, "count": latency.count if latency else None}


def _record(
    stored: StoredResult,
    job: JobRow | None,
    model: str,
    files: dict[str, str],
    prices: Prices,
) -> dict[str, Any]:
    conf, r = stored.configuration, stored.result
    accuracy, evaluation = r.accuracy, r.evaluation
    cal = conf.calibration_sha256
    series = series_name(stored.job_id, model, conf)
    return {
        "result_id": stored.id,
        "job_id": stored.job_id,
        "model_id": job.model_id if job else None,
        "model": model,
        "job_label": job.label if job else None,
        "series": series,
        "label": f"{series} b{conf.batch_size}",
        "config_key": stored.config_key,
        **columns(conf),  # every knob that declares a column (backend.knobs)
        "status": r.status.value,
        "error": r.error,
        **_latency_columns(r.latency),
        "throughput": r.throughput,
        "stable": r.stable,
        "peak_rss_mb": r.peak_rss_mb,
        "peak_rss_scope": r.peak_rss_scope,
        "gpu_memory_mb": r.gpu_memory_mb,
        "model_size_bytes": r.model_size_bytes,
        "session_create_ms": r.session_create_ms,
        "first_inference_ms": r.first_inference_ms,
        "max_abs_error": accuracy.max_abs_error if accuracy else None,
        "mean_rel_error": accuracy.mean_rel_error if accuracy else None,
        "cosine_similarity": accuracy.cosine_similarity if accuracy else None,
        "top1_agreement": accuracy.top1_agreement if accuracy else None,
        "top1_rows": accuracy.top1_rows or None if accuracy else None,
        "eval_top1_accuracy": evaluation.top1_accuracy if evaluation else None,
        "eval_top1_agreement": evaluation.top1_agreement if evaluation else None,
        "evaluation_set": files.get(evaluation.set_sha256, evaluation.set_sha256[:12])
        if evaluation
        else None,
        "calibration_set": (files.get(cal, cal[:12]) if cal else "random")
        if conf.precision == Precision.INT8_STATIC
        else None,
        "providers_used": ", ".join(r.providers_used),
        # what the runtime says it ran (OpenVINO's compiled precision), where it says so
        "execution_precision": r.runtime_facts.get("execution_precision"),
        "layer_precisions": layers_said(r.runtime_facts.get("layer_precisions")),
        "int8_kernels": r.runtime_facts.get("int8_matmul") if conf.precision.is_int8 else None,
        **_distance_columns(stored),
        **energy_columns(r.energy),
        "notes": r.notes_text,
        "ran_on": ran_on(r.environment),
        "software": software(r.environment),
        "hardware": hardware(r.environment, conf.provider),
        **cost.row_cost(prices, conf.provider, conf.target, r.throughput, stored.ok),
    }


def energy_columns(report: EnergyReport | None) -> dict[str, Any]:
    """J/sample (median, min-max of the windows), power timed and idle, and its source."""
    measured = report is not None and report.measured
    return {
        "j_per_sample": report.j_p50 if measured else None,
        "j_per_sample_min": report.j_min if measured else None,
        "j_per_sample_max": report.j_max if measured else None,
        "j_per_sample_above_idle": report.j_above_idle_p50 if measured else None,
        "active_w": report.active_w if measured else None,
        "idle_w": report.idle_w if measured else None,
        "energy_source": report.source if report else None,  # None: not recorded
    }


def _distance_columns(stored: StoredResult) -> dict[str, Any]:
    """What the timing includes, FLOP/s and the share of the device's peak (GPU results)."""
    found = distance.distance(stored.result) if stored.ok else None
    reference = stored.result.telemetry.get("resnet50_like") and stored.result.throughput
    return {
        "timing": stored.configuration.io_mode.label,
        "tflops": found.achieved_flops / 1e12 if found else None,
        "peak_fraction": found.fraction if found else None,
        "mlperf_share": (
            stored.result.throughput / distance.MLPERF_RESNET50_H200 if reference else None
        ),
    }


def results_frame(
    job_ids: list[int] | None = None,
    model_id: int | None = None,
    result_ids: list[int] | None = None,
) -> pd.DataFrame:
    """One row per stored result (ok, failed or unavailable), newest job last."""
    rows = [
        StoredResult.from_row(row)
        for row in result_store.list_results(
            job_ids=job_ids, model_id=model_id, result_ids=result_ids
        )
    ]
    jobs: dict[int, JobRow | None] = {
        jid: job_store.get_job(jid) for jid in {r.job_id for r in rows}
    }
    names: dict[int, str] = {}
    for job in jobs.values():
        if job is not None and job.model_id not in names:
            model = model_store.get_model(job.model_id)
            names[job.model_id] = model.name if model else f"model {job.model_id}"
    # the names calibration and evaluation files were uploaded under, by sha256
    files = {
        a.sha256: a.filename
        for model_id in names
        for a in model_store.list_artifacts(model_id)
        if a.kind in ("calibration", "evaluation")
    }
    prices = {jid: job_prices(job) for jid, job in jobs.items()}
    records = [
        _record(
            r,
            jobs[r.job_id],
            names.get(jobs[r.job_id].model_id, "?") if jobs[r.job_id] else "?",
            files,
            prices[r.job_id],
        )
        for r in rows
    ]
    shares = distance.copy_shares([r.result for r in rows])
    for record, stored in zip(records, rows, strict=True):
        record["copy_share"] = shares.get(distance.io_pair_key(stored.configuration))
    frame = pd.DataFrame.from_records(records, columns=COLUMNS)
    numeric = ("p50_ms", "p90_ms", "p95_ms", "p99_ms", "mean_ms", "throughput")
    for column in (*numeric, "price_per_hour", "cost_per_million"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame.sort_values(["job_id", "series", "batch_size"], kind="stable").reset_index(
        drop=True
    )


def comparable_jobs(
    limit: int = 500,
    include: tuple[int, ...] = (),
    serving: bool = False,
    generation: bool = False,
    regression: bool = False,
) -> pd.DataFrame:
    """Jobs with results or still to produce them, newest first, for the Compare picker.

    `include` adds older jobs that a shared link names, however far back they are. Sweeps by
    default; serving=True: the serving studies instead (their points are not sweep results);
    generation=True: the generation benchmarks (their points are generation points);
    regression=True: the regression checks (two sides per configuration).
    """
    jobs = [
        j for j in job_store.list_jobs(limit=limit) if j.progress_done > 0 or not j.state.finished
    ]
    known = {j.id for j in jobs}
    for job_id in include:
        if job_id not in known and (job := job_store.get_job(job_id)) is not None:
            jobs.append(job)
    wanted = (
        JobKind.GENERATION
        if generation
        else JobKind.SERVING
        if serving
        else JobKind.REGRESSION
        if regression
        else JobKind.SWEEP
    )
    jobs = [j for j in jobs if j.kind == wanted]  # a kind this version does not know: none
    names = {m.id: m.name for m in model_store.list_models()}
    return pd.DataFrame(
        {
            "job_id": [j.id for j in jobs],
            "model_id": [j.model_id for j in jobs],
            "model": [names.get(j.model_id, f"model {j.model_id}") for j in jobs],
            "label": [j.label or "" for j in jobs],
            "state": [j.state.value for j in jobs],
            "results": [j.progress_done for j in jobs],
            "created_at": [j.created_at for j in jobs],
        }
    )


def layers_said(counts: Any) -> str | None:
    """'i8 12 layers, f32 30': layers by the precision each runs at, most first (OpenVINO's);
    None for none or one precision (its execution precision says that)."""
    if not isinstance(counts, dict) or len(counts) < 2:
        return None
    first, *rest = [f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return ", ".join([f"{first} layers", *rest])


def samples_for(result_ids: list[int]) -> dict[int, np.ndarray]:
    """Raw per-call latencies (ms) of each result, as float arrays."""
    raw = result_store.result_samples(list(result_ids))
    return {rid: np.asarray(values, dtype=np.float64) for rid, values in raw.items()}


def add_accuracy_loss(frame: pd.DataFrame, metric: str = "mean_rel_error") -> pd.DataFrame:
    """Column `accuracy_loss` (0 = same outputs as FP32) read the way the user chose."""
    if metric not in metrics.LOSSES:
        raise ValueError(f"unknown accuracy metric {metric!r}")
    source = metrics.metric(metrics.LOSSES[metric])
    out = frame.copy()
    values = pd.to_numeric(out[source.key], errors="coerce")
    out["accuracy_loss"] = 1.0 - values if source.higher_is_better else values
    return out


__all__ = [
    "COLUMNS",
    "LOSS_METRICS",
    "METRICS",
    "add_accuracy_loss",
    "add_cost_pareto",
    "add_pareto",
    "add_speedups",
    "comparable_jobs",
    "results_frame",
    "samples_for",
    "series_name",
]
