"""A sweep's series as the serving prediction's variants: each one's latency-vs-batch curve
(median per-call latency at each batch size, in-process ONNX Runtime), whether Triton can batch
its file, and what the prediction then rests on, in words.

The per-request overhead of a server and its cost per execution (scheduling, backend call) are
user settings here, which an in-process sweep never pays: the sentence says they were assumed,
and how to measure them. A series whose file a finished serving study measured on the server of
the same host is simulated from that study's cost curve instead (servercosts.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from backend.errors import UserError
from backend.models import library
from backend.pricing import Price
from backend.serving.recommend import MeasuredVariant
from backend.serving.repository import inputs_can_batch
from backend.serving.servercosts import StudyCosts
from backend.serving.types import LatencyCurve
from backend.specs import Precision

NORMAL_P90_Z = 1.2816  # a normal law's p90 lies this many sigmas above its median


def variants_from_results(
    frame: pd.DataFrame,
    overhead_ms: float,
    execution_ms: float = 0.0,
    server_costs: dict[str, StudyCosts] | None = None,
    remedy: str = "",
) -> list[MeasuredVariant]:
    """One MeasuredVariant per sweep series with a measured latency at one batch size or more.

    A series in `server_costs` (by series name) is simulated from the curve a serving study
    measured on the server for its file (servercosts.py), not from the sweep's; the others from
    the sweep's, with `remedy` saying how to measure what they leave out."""
    server_costs = server_costs or {}
    ok = frame[(frame["status"] == "ok") & frame["p50_ms"].notna()]
    variants = []
    for _, rows in ok.groupby("series", sort=True):
        curve = _sweep_curve(rows, overhead_ms, execution_ms)
        first = rows.iloc[0]
        price = None
        if pd.notna(first.get("price_per_hour")) and first.get("priced_as"):
            price = Price(str(first["priced_as"]), float(first["price_per_hour"]))
        sizes = ", ".join(str(b) for b in curve.batch_sizes)
        plural = "s" if len(curve.batch_sizes) > 1 else ""
        batchable, served_file, why = _served(rows)
        rests_on = (
            f"the sweep's in-process latency at batch size{plural} {sizes} and an assumed "
            f"{overhead_ms:g} ms per request outside compute and "
            f"{execution_ms:g} ms of server cost per batch"
        )
        studied = server_costs.get(str(first["series"]))
        unstable = () if studied else _unstable_batches(rows)
        variants.append(
            MeasuredVariant(
                str(first["precision"]),
                str(first["provider"]),
                studied.curve if studied else curve,
                target=str(first.get("target") or ""),
                runtime=str(first.get("backend") or "onnxruntime"),
                price=price,
                batchable=batchable,
                served_file=served_file,
                batching_why=why,
                rests_on="" if studied else rests_on,
                costs_from=studied.words if studied else "",
                remedy="" if studied else remedy,
                unstable_batches=unstable,
            )
        )
    return variants


def _sweep_curve(rows: pd.DataFrame, overhead_ms: float, execution_ms: float) -> LatencyCurve:
    """One series' median latency per batch size plus the server's cost per batch, and its
    jitter relative to that compute."""
    by_batch = rows.groupby("batch_size").agg(p50=("p50_ms", "median"), p90=("p90_ms", "median"))
    by_batch = by_batch.sort_index()
    compute = by_batch["p50"] + execution_ms  # what the curve holds and the jitter scales
    spread = (robust_sigma(by_batch["p50"], by_batch["p90"]) / compute).replace([np.inf], np.nan)
    spread = spread.dropna()
    return LatencyCurve(
        batch_sizes=tuple(int(b) for b in by_batch.index),
        compute_ms=tuple(float(v) for v in compute),
        overhead_ms=overhead_ms,
        compute_jitter=float(spread.median()) if not spread.empty else 0.0,
    )


def robust_sigma(p50: pd.Series, p90: pd.Series) -> pd.Series:
    """A sweep's spread of latency as a normal law's sigma from its p50 and p90 ((p90 - p50) /
    1.2816), as curve._robust_cv reads a server's from its quartiles: a few slow calls (a host's
    hiccup) do not dominate it the way they dominate the standard deviation. With std / p50 a
    noisy INT8 MLP (std 0.051 ms at p50 0.009) got a coefficient of variation of 5.5, applied to
    its p50 plus the server's cost per batch, and was predicted to serve more than a steadier,
    faster FP32."""
    return ((p90 - p50) / NORMAL_P90_Z).clip(lower=0.0)


def _unstable_batches(rows: pd.DataFrame) -> tuple[int, ...]:
    """The batch sizes with a measurement judged unstable (a verdict False, not a missing one)."""
    if "stable" not in rows:
        return ()
    shaky = rows[rows["stable"].eq(False)]
    return tuple(sorted({int(b) for b in shaky["batch_size"]}))


def _served(rows: pd.DataFrame) -> tuple[bool, str, str]:
    """Whether Triton can batch the file a series would be served from, which file that is and
    why it batches or not, in words. A series swept with fixed shapes has the batch size baked
    into each file (Triton serves those without dynamic batching, repository.plan_model), so
    only FP32 on ONNX Runtime can batch, as the uploaded model when its batch axis is dynamic
    (what `serve recommend --confirm` serves, confirm.job_files)."""
    first = rows.iloc[0]
    precision = str(first["precision"])
    try:
        name = Precision(precision).label
    except ValueError:
        name = precision
    own = f"the sweep's {name} file"
    sizes = sorted({int(b) for b in rows["batch_size"]})
    # a fixed-shape sweep stores one file per batch size; one that cannot batch is served as
    # the smallest's (recommend.servable: no dynamic batching, batch 1; confirm.job_files)
    fixed_own = f"{own} for batch size {sizes[0]}" if len(sizes) > 1 else own
    if "fixed_shapes" not in rows or not rows["fixed_shapes"].fillna(False).astype(bool).all():
        return True, own, "its batch axis is dynamic"
    if precision != "fp32":
        return (
            False,
            fixed_own,
            "its batch size is fixed and the FP32 upload cannot stand in for it",
        )
    if str(first.get("backend")) != "onnxruntime":
        return (
            False,
            fixed_own,
            "its batch size is fixed (the upload stands in on ONNX Runtime only)",
        )
    try:  # the inputs read at ingest, in its child: this runs in the dashboard
        upload = inputs_can_batch(library.get_model(int(first["model_id"])).inputs)
    except UserError:  # deleted since: take it as fixed
        upload = False
    if not upload:
        return False, fixed_own, "its batch size is fixed, and so is the uploaded model's"
    return True, "the uploaded model", "its batch axis is dynamic, unlike the sweep's files"
