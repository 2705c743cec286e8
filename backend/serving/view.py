"""What the Serve page shows, in one call: curves from stored sweeps, recommendation, chart data.

The latency-vs-batch curve of each variant comes from a finished Optimize sweep (median per-call
latency at each batch size, in-process ONNX Runtime); the per-request overhead of a server is a
user setting until a curve measured through the Triton server (serving.curve) is stored, and so
is the server's own cost per execution (scheduling, backend call), which an in-process sweep never
pays: without it a tiny model would be predicted to serve millions of requests per second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from backend.errors import UserError
from backend.reporting import frames
from backend.serving.recommend import Evidence, Recommendation, Variant, recommend
from backend.serving.simulate import RANKING_REQUESTS, simulate
from backend.serving.types import LatencyCurve, LoadPoint, LoadSpec, Scenario

CURVE_RATES = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 0.97)  # fractions of a candidate's capacity
SHOWN = 4  # configurations drawn besides the default


@dataclass(frozen=True)
class ServeView:
    """The recommendation and, per shown configuration, its throughput-vs-p99 curve."""

    recommendation: Recommendation
    variants: list[Variant]
    curves: dict[str, list[LoadPoint]]  # configuration label -> points, rate ascending
    chosen: dict[str, LoadPoint]  # configuration label -> the point the sentence quotes


def variants_from_results(
    frame: pd.DataFrame, overhead_ms: float, execution_ms: float = 0.0
) -> list[Variant]:
    """One Variant per sweep series with a measured latency at one batch size or more."""
    ok = frame[(frame["status"] == "ok") & frame["p50_ms"].notna()]
    variants = []
    for _, rows in ok.groupby("series", sort=True):
        by_batch = rows.groupby("batch_size").agg(
            p50=("p50_ms", "median"), std=("std_ms", "median")
        )
        by_batch = by_batch.sort_index()
        spread = (by_batch["std"] / by_batch["p50"]).replace([np.inf], np.nan).dropna()
        curve = LatencyCurve(
            batch_sizes=tuple(int(b) for b in by_batch.index),
            compute_ms=tuple(float(v) + execution_ms for v in by_batch["p50"]),
            overhead_ms=overhead_ms,
            compute_jitter=float(spread.median()) if not spread.empty else 0.0,
        )
        first = rows.iloc[0]
        variants.append(Variant(str(first["precision"]), str(first["provider"]), curve))
    return variants


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
) -> ServeView:
    """Recommend a serving configuration for a finished sweep and gather what the page draws."""
    if overhead_ms < 0 or execution_ms < 0:
        raise UserError("Overheads cannot be negative; use 0 or more milliseconds.")
    frame = frames.results_frame([job_id])
    variants = variants_from_results(frame, overhead_ms, execution_ms)
    if not variants:
        raise UserError(
            f"Job #{job_id} has no measured latency yet; pick a finished sweep with results."
        )
    rec = recommend(variants, slo_p99_ms, min_rps=min_rps, seed=seed)
    shown = rec.ranked[:SHOWN] + ([rec.default] if rec.default else [])
    curves = {e.candidate.label: _curve_points(e, seed) for e in shown}
    chosen = {e.candidate.label: e.point for e in shown}
    return ServeView(rec, variants, curves, chosen)
