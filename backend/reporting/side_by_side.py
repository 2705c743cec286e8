"""Runtimes side by side: one row per precision and batch, one column group per runtime.

Every configuration's accuracy is already measured against the same reference (ONNX Runtime's
CPU on the uploaded FP32 model, same inputs), so the cells of a row compare directly. Speed is the
reference runtime's FP32 latency at the same batch divided by the cell's (above 1 is faster).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from backend.reporting.metrics import REGISTRY as METRICS
from backend.specs import Precision

REFERENCE_RUNTIME = "onnxruntime"
FIELDS = {
    "p50_ms": METRICS["p50_ms"].header,
    "vs_fp32": "vs FP32",
    "cosine_similarity": METRICS["cosine_similarity"].header,
    "top1_agreement": METRICS["top1_agreement"].header,
    "ran_as": "ran as",
}


def runtime_label(runtime: str, provider: str) -> str:
    name = {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}.get(runtime, runtime)
    return f"{name} {provider.upper()}"


def _ran_as(row: pd.Series) -> str:
    """What really ran: the layers at each precision where the runtime reports them (OpenVINO's
    INT8 compiles for f32 and runs its int8 layers in i8), else its execution precision, else
    the graph as built (ONNX Runtime reports none); or why nothing ran."""
    if row["status"] != "ok":
        return f"{row['status']}: {row['error'] or ''}".strip(": ")
    hint, layers = row.get("execution_precision"), row.get("layer_precisions")
    hint = hint if isinstance(hint, str) and hint else None
    if isinstance(layers, str) and layers:
        return f"{layers} (compiled for {hint})" if hint else layers
    return hint or "as built"


def runtimes_side_by_side(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows (model, precision, batch) x columns '<runtime> · <field>'; empty without 2 runtimes."""
    if frame.empty or frame["backend"].nunique() < 2:
        return pd.DataFrame()
    data = frame.assign(
        runtime=[
            runtime_label(b, p) for b, p in zip(frame["backend"], frame["provider"], strict=True)
        ],
        ran_as=frame.apply(_ran_as, axis=1),
    )
    reference = data[
        (data["backend"] == REFERENCE_RUNTIME)
        & (data["precision"] == Precision.FP32.value)
        & (data["status"] == "ok")
    ]
    fp32 = reference.groupby(["model", "batch_size"])["p50_ms"].min()
    keys = list(zip(data["model"], data["batch_size"], strict=True))
    base = pd.Series([fp32.get(key) for key in keys], index=data.index, dtype=float)
    ratio = base / data["p50_ms"].astype(float)
    data["vs_fp32"] = ratio.where(data["status"] == "ok")  # wrong outputs are no speedup
    data["precision"] = [Precision(p).label for p in data["precision"]]
    wide = data.pivot_table(
        index=["model", "precision", "batch_size"],
        columns="runtime",
        values=list(FIELDS),
        aggfunc="first",
        dropna=False,
    )
    # dropna=False keeps a runtime's all-empty cells, but also crosses the index levels: keep the
    # (model, precision, batch) rows some runtime measured, not every model at every precision
    measured = pd.MultiIndex.from_frame(data[["model", "precision", "batch_size"]])
    wide = wide[wide.index.isin(measured)]
    runtimes = list(dict.fromkeys(data["runtime"]))
    columns = [(field, runtime) for runtime in runtimes for field in FIELDS]
    wide = wide.reindex(columns=pd.MultiIndex.from_tuples(columns))
    wide.columns = [f"{runtime} · {FIELDS[field]}" for field, runtime in columns]
    order = {p.label: i for i, p in enumerate(Precision)}
    wide = wide.reset_index().rename(columns={"batch_size": "batch"})
    return wide.sort_values(
        ["model", "precision", "batch"], key=lambda c: c.map(order) if c.name == "precision" else c
    ).reset_index(drop=True)


# "items/s" is what this table has always said; elsewhere throughput's header is "samples/s"
TARGET_FIELDS = {
    "p50_ms": METRICS["p50_ms"].header,
    "throughput": "items/s",
    "vs_first": "speed vs first",
    "cost_per_million": METRICS["cost_per_million"].header,  # each target at its own price
}


def targets_side_by_side(frame: pd.DataFrame) -> pd.DataFrame:
    """The same configuration on each hardware target: rows are configurations (the key less
    its target), columns '<target> · <field>'; 'speed vs first' is the first target's p50
    divided by the cell's (above 1 is faster). Empty with fewer than two targets."""
    data = frame[frame["target"].fillna("") != ""] if "target" in frame else frame.iloc[0:0]
    if data.empty or data["target"].nunique() < 2:
        return pd.DataFrame()
    data = data.assign(
        configuration=[key.rsplit("@", 1)[0] for key in data["config_key"]],
        runtime=[
            runtime_label(b, p) for b, p in zip(data["backend"], data["provider"], strict=True)
        ],
        precision=[Precision(p).label for p in data["precision"]],
    )
    targets = list(dict.fromkeys(data["target"]))
    ok = data["status"] == "ok"  # wrong outputs (and failures) are compared with nothing
    first = data[(data["target"] == targets[0]) & ok]
    first = first.set_index(["model", "configuration"])["p50_ms"]
    keys = list(zip(data["model"], data["configuration"], strict=True))
    base = pd.Series([first.get(key) for key in keys], index=data.index, dtype=float)
    data["vs_first"] = (base / data["p50_ms"].astype(float)).where(ok)
    rows = ["model", "runtime", "precision", "batch_size", "replicas", "configuration"]
    # dropna=False would cross every index level with every other; reindex keeps all targets
    wide = data.pivot_table(
        index=rows, columns="target", values=list(TARGET_FIELDS), aggfunc="first"
    )
    columns = [(field, target) for target in targets for field in TARGET_FIELDS]
    wide = wide.reindex(columns=pd.MultiIndex.from_tuples(columns))
    wide.columns = [f"{target} · {TARGET_FIELDS[field]}" for field, target in columns]
    wide = wide.reset_index().rename(columns={"batch_size": "batch", "configuration": "key"})
    costs = wide[[f"{t} · {TARGET_FIELDS['cost_per_million']}" for t in targets]].astype(float)
    priced = costs.notna().any(axis=1)  # compared by cost: the target a million costs least on
    wide["cheapest target"] = [
        targets[int(np.nanargmin(row))] if any_price else ""
        for row, any_price in zip(costs.to_numpy(), priced, strict=True)
    ]
    return wide.sort_values(["model", "runtime", "batch"]).reset_index(drop=True)
