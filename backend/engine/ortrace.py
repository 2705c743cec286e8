"""ONNX Runtime's JSON trace of a profiling session: how it is recorded and read.

Kept apart from profile.py, which maps the nodes read here back to the uploaded model's nodes.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions

PROFILE_RUNS = 20


def parse_trace(events: list[dict[str, Any]]) -> tuple[int, dict[str, dict[str, Any]]]:
    """(runs kept, {node name: {op, provider, calls, total_us}}) from ORT's JSON trace.

    The first model_run is a warm-up (allocation, kernel choice) and is left out. A node's total
    is its median call times its calls: one call stretched by another process on the host (a
    50 ms preemption against a model of a fraction of a millisecond) would otherwise outweigh
    every other run and move every node's share.
    """
    runs = sorted(
        (e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
        key=lambda e: e["ts"],
    )
    cutoff = runs[0]["ts"] + runs[0]["dur"] if len(runs) > 1 else -1
    nodes: dict[str, dict[str, Any]] = {}
    durations: dict[str, list[float]] = {}
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        if event["ts"] < cutoff:
            continue
        args = event.get("args", {})
        key = name[: -len("_kernel_time")]
        entry = nodes.setdefault(
            key,
            {"op": args.get("op_name", "?"), "provider": args.get("provider", "?")},
        )
        durations.setdefault(key, []).append(float(event.get("dur", 0)))
    for key, entry in nodes.items():
        entry["calls"] = len(durations[key])
        entry["total_us"] = statistics.median(durations[key]) * entry["calls"]
    return max(len(runs) - 1, 1), nodes


def trace_events(
    model_path: Path,
    options: SessionOptions,
    feed: dict[str, np.ndarray],
    runs: int = PROFILE_RUNS,
    runtime: str = "onnxruntime",
) -> tuple[list[dict[str, Any]], onnx.ModelProto | None]:
    """The runtime's trace of `runs` + 1 runs, and the graph it optimized (when it wrote one)."""
    with tempfile.TemporaryDirectory(prefix="optiboard-profile-") as tmp:
        optimized_path = Path(tmp) / "optimized.onnx"
        profiled = replace(
            options, optimized_model_path=optimized_path, profile_prefix=Path(tmp) / "trace"
        )
        with get_runtime(runtime).open(Path(model_path), profiled) as runner:
            for _ in range(runs + 1):
                runner.infer(feed)
            trace = runner.end_profiling()
        events = json.loads(Path(trace).read_text())
        optimized = (
            onnx.load(str(optimized_path), load_external_data=False)
            if optimized_path.is_file()
            else None
        )
    return events, optimized
