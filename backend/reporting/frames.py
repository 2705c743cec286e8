"""Results as pandas DataFrames: speedups against a baseline, the Pareto front, and exports.

Pages and charts never see SQL or payload dicts: everything they plot is a column here.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from backend.reporting.csvsafe import safe_frame
from backend.specs import Precision
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import results as result_store
from storage.repo.jobs import JobRow
from storage.repo.results import ResultRow


@dataclass(frozen=True)
class Metric:
    """One column people compare: its key, label and unit, in one place."""

    key: str
    label: str
    unit: str
    higher_is_better: bool = False


METRICS: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric("p50_ms", "p50 latency", "ms"),
        Metric("p90_ms", "p90 latency", "ms"),
        Metric("p99_ms", "p99 latency", "ms"),
        Metric("mean_ms", "mean latency", "ms"),
        Metric("throughput", "throughput", "samples/s", higher_is_better=True),
        Metric("peak_rss_mb", "peak memory (RSS)", "MB"),
        Metric("gpu_memory_mb", "GPU memory", "MB"),
        Metric("speedup", "speedup vs baseline (p50)", "x", higher_is_better=True),
        Metric("throughput_ratio", "throughput vs baseline", "x", higher_is_better=True),
    )
}

# How "accuracy loss" is read from the accuracy report; 0 means identical to FP32.
LOSS_METRICS: dict[str, str] = {
    "mean_rel_error": "mean relative error",
    "max_abs_error": "max absolute error",
    "cosine_distance": "1 - cosine similarity",
    "top1_disagreement": "1 - top-1 agreement",
}

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
    "gpu_memory_mb",
    "model_size_bytes",
    "session_create_ms",
    "first_inference_ms",
    "max_abs_error",
    "mean_rel_error",
    "cosine_similarity",
    "top1_agreement",
    "providers_used",
    "notes",
]


def series_name(job_id: int, model: str, configuration: dict[str, Any]) -> str:
    """A configuration family across batch sizes: what a line on a chart is called."""
    precision = Precision(configuration.get("precision", "fp32"))
    parts = [f"#{job_id} {model}", str(configuration.get("provider", "cpu")).upper()]
    parts.append(precision.label)
    if configuration.get("fp32_nodes"):  # mixed precision is its own point on every chart
        parts.append(f"mixed ({len(configuration['fp32_nodes'])} in FP32)")
    if configuration.get("backend", "onnxruntime") != "onnxruntime":
        parts.append(str(configuration["backend"]))
    if not configuration.get("fixed_shapes", True):
        parts.append("dynamic")
    if configuration.get("optimization_level", "all") != "all":
        parts.append(f"opt={configuration['optimization_level']}")
    if configuration.get("intra_op_threads", 0):
        parts.append(f"{configuration['intra_op_threads']} threads")
    if configuration.get("simplify"):
        parts.append("simplified")
    dims = configuration.get("symbolic_dims") or {}
    if dims:
        parts.append(",".join(f"{k}={v}" for k, v in sorted(dict(dims).items())))
    return " ".join(parts)


def _record(row: ResultRow, job: JobRow | None, model: str) -> dict[str, Any]:
    payload = row.payload
    conf = row.configuration
    latency = payload.get("latency") or {}
    accuracy = payload.get("accuracy") or {}
    series = series_name(row.job_id, model, conf)
    return {
        "result_id": row.id,
        "job_id": row.job_id,
        "model_id": job.model_id if job else None,
        "model": model,
        "job_label": job.label if job else None,
        "series": series,
        "label": f"{series} b{conf.get('batch_size', 1)}",
        "config_key": row.config_key,
        "backend": conf.get("backend", "onnxruntime"),
        "provider": conf.get("provider", "cpu"),
        "precision": conf.get("precision"),
        "batch_size": int(conf.get("batch_size", 1)),
        "fixed_shapes": bool(conf.get("fixed_shapes", True)),
        "optimization_level": conf.get("optimization_level", "all"),
        "intra_op_threads": int(conf.get("intra_op_threads", 0)),
        "simplify": bool(conf.get("simplify", False)),
        "status": row.status,
        "error": row.error,
        "p50_ms": latency.get("p50"),
        "p90_ms": latency.get("p90"),
        "p95_ms": latency.get("p95"),
        "p99_ms": latency.get("p99"),
        "mean_ms": latency.get("mean"),
        "std_ms": latency.get("std"),
        "min_ms": latency.get("min"),
        "max_ms": latency.get("max"),
        "count": latency.get("count"),
        "throughput": payload.get("throughput"),
        "stable": payload.get("stable"),
        "peak_rss_mb": payload.get("peak_rss_mb"),
        "gpu_memory_mb": payload.get("gpu_memory_mb"),
        "model_size_bytes": payload.get("model_size_bytes"),
        "session_create_ms": payload.get("session_create_ms"),
        "first_inference_ms": payload.get("first_inference_ms"),
        "max_abs_error": accuracy.get("max_abs_error"),
        "mean_rel_error": accuracy.get("mean_rel_error"),
        "cosine_similarity": accuracy.get("cosine_similarity"),
        "top1_agreement": accuracy.get("top1_agreement"),
        "providers_used": ", ".join(payload.get("providers_used") or []),
        "notes": "; ".join(payload.get("notes") or []),
    }


def results_frame(
    job_ids: list[int] | None = None,
    model_id: int | None = None,
    result_ids: list[int] | None = None,
) -> pd.DataFrame:
    """One row per stored result (ok, failed or unavailable), newest job last."""
    rows = result_store.list_results(job_ids=job_ids, model_id=model_id, result_ids=result_ids)
    jobs: dict[int, JobRow | None] = {
        jid: job_store.get_job(jid) for jid in {r.job_id for r in rows}
    }
    names: dict[int, str] = {}
    for job in jobs.values():
        if job is not None and job.model_id not in names:
            model = model_store.get_model(job.model_id)
            names[job.model_id] = model.name if model else f"model {job.model_id}"
    records = [
        _record(
            r, jobs[r.job_id], names.get(jobs[r.job_id].model_id, "?") if jobs[r.job_id] else "?"
        )
        for r in rows
    ]
    frame = pd.DataFrame.from_records(records, columns=COLUMNS)
    for column in ("p50_ms", "p90_ms", "p95_ms", "p99_ms", "mean_ms", "throughput"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame.sort_values(["job_id", "series", "batch_size"], kind="stable").reset_index(
        drop=True
    )


def comparable_jobs(limit: int = 500, include: tuple[int, ...] = ()) -> pd.DataFrame:
    """Jobs with results or still to produce them, newest first, for the Compare picker.

    `include` adds older jobs that a shared link names, however far back they are.
    """
    jobs = [
        j for j in job_store.list_jobs(limit=limit) if j.progress_done > 0 or not j.state.finished
    ]
    known = {j.id for j in jobs}
    for job_id in include:
        if job_id not in known and (job := job_store.get_job(job_id)) is not None:
            jobs.append(job)
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


def samples_for(result_ids: list[int]) -> dict[int, np.ndarray]:
    """Raw per-call latencies (ms) of each result, as float arrays."""
    raw = result_store.result_samples(list(result_ids))
    return {rid: np.asarray(values, dtype=np.float64) for rid, values in raw.items()}


def add_speedups(frame: pd.DataFrame, baseline_series: str | None) -> pd.DataFrame:
    """Speedup of each row over the baseline family at the same model and batch size.

    Latency per call grows with the batch, so a row is only compared with the baseline's row of
    the same batch size; rows without such a partner get NaN rather than a misleading ratio.
    """
    out = frame.copy()
    out["speedup"] = np.nan
    out["throughput_ratio"] = np.nan
    if baseline_series is None or out.empty:
        return out
    base = out[(out["series"] == baseline_series) & (out["status"] == "ok")]
    base = base.drop_duplicates(["model_id", "batch_size"]).set_index(["model_id", "batch_size"])
    if base.empty:
        return out
    keys = pd.MultiIndex.from_arrays([out["model_id"], out["batch_size"]])
    base_p50 = base["p50_ms"].reindex(keys).to_numpy(dtype=float)
    base_tp = base["throughput"].reindex(keys).to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["speedup"] = base_p50 / out["p50_ms"].to_numpy(dtype=float)
        out["throughput_ratio"] = out["throughput"].to_numpy(dtype=float) / base_tp
    return out


def add_accuracy_loss(frame: pd.DataFrame, metric: str = "mean_rel_error") -> pd.DataFrame:
    """Column `accuracy_loss` (0 = same outputs as FP32) read the way the user chose."""
    if metric not in LOSS_METRICS:
        raise ValueError(f"unknown accuracy metric {metric!r}")
    out = frame.copy()
    if metric == "cosine_distance":
        out["accuracy_loss"] = 1.0 - pd.to_numeric(out["cosine_similarity"], errors="coerce")
    elif metric == "top1_disagreement":
        out["accuracy_loss"] = 1.0 - pd.to_numeric(out["top1_agreement"], errors="coerce")
    else:
        out["accuracy_loss"] = pd.to_numeric(out[metric], errors="coerce")
    return out


def pareto_mask(speedup: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """True where no other point is at least as fast and as accurate, and better in one."""
    speedup = np.asarray(speedup, dtype=float)
    loss = np.asarray(loss, dtype=float)
    mask = np.zeros(speedup.shape, dtype=bool)
    valid = np.flatnonzero(np.isfinite(speedup) & np.isfinite(loss))
    order = valid[np.lexsort((loss[valid], -speedup[valid]))]  # fastest first, then most exact
    best_loss = np.inf
    for index in order:
        if loss[index] < best_loss:
            mask[index] = True
            best_loss = loss[index]
    return mask


def export_csv(frame: pd.DataFrame) -> bytes:
    return safe_frame(frame).to_csv(index=False).encode("utf-8")


def export_json(frame: pd.DataFrame) -> bytes:
    """Records with NaN as null, so the file loads anywhere."""
    records = json.loads(frame.to_json(orient="records", date_format="iso"))
    return json.dumps(records, indent=2).encode("utf-8")


REPORT_COLUMNS = [
    "label",
    "status",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "throughput",
    "speedup",
    "accuracy_loss",
    "peak_rss_mb",
    "notes",
]


def html_report(title: str, frame: pd.DataFrame, figures: list[Any], baseline: str | None) -> str:
    """One self-contained HTML file: plotly.js inlined once, every figure and the summary table."""
    parts = []
    for index, figure in enumerate(figures):
        parts.append(
            figure.to_html(full_html=False, include_plotlyjs=index == 0, default_height="480px")
        )
    columns = [c for c in REPORT_COLUMNS if c in frame.columns]
    table = frame[columns].to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep="–")
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    base = html.escape(baseline) if baseline else "none"
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2rem;}table{border-collapse:collapse;"
        "font-size:13px}td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}"
        "td:first-child{text-align:left}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>Generated {generated} by Optiboard; "
        f"{len(frame)} configurations; baseline: {base}.</p>"
        + "".join(parts)
        + f"<h2>All configurations</h2>{table}</body></html>"
    )
