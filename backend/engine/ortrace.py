"""ONNX Runtime's JSON trace of a profiling session: how it is recorded and read.

Kept apart from profile.py, which maps the nodes read here back to the uploaded model's nodes.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions

PROFILE_RUNS = 20
# ops that run subgraphs: ORT times each around its body's nodes, whose own events it also writes
CONTROL_FLOW_OPS = ("If", "Loop", "Scan")


def _enclosing(kernels: list[dict[str, Any]]) -> list[str]:
    """For each kernel event, the control-flow node whose event encloses it on the same thread
    (the innermost, '' for none): ORT writes a branch node's event from inside its If's, and the
    If's duration already holds it (the real trace of tests/models.make_unnamed_if: If_2 from
    ts 15431 for 11 us, its then-branch MatMul_0 from 15432 for 3 us, no other link between
    them). A sweep over the events by start, longest first, with a stack of open parents."""
    order = sorted(
        range(len(kernels)),
        key=lambda i: (
            kernels[i].get("pid"),
            kernels[i].get("tid"),
            kernels[i]["ts"],
            -kernels[i].get("dur", 0),
        ),
    )
    parents = [""] * len(kernels)
    open_: list[tuple[Any, float, str]] = []  # (thread, end, name) of enclosing control flow
    for i in order:
        event = kernels[i]
        thread = (event.get("pid"), event.get("tid"))
        start, end = event["ts"], event["ts"] + event.get("dur", 0)
        while open_ and (open_[-1][0] != thread or open_[-1][1] < end or open_[-1][1] <= start):
            open_.pop()
        name = str(event["name"])[: -len("_kernel_time")]
        parents[i] = open_[-1][2] if open_ else ""
        if event.get("args", {}).get("op_name") in CONTROL_FLOW_OPS:
            open_.append((thread, end, name))
    return parents


def parse_trace(events: list[dict[str, Any]]) -> tuple[int, dict[str, dict[str, Any]]]:
    """(runs kept, {node name: {op, provider, calls, total_us, parent}}) from ORT's JSON trace.

    The first model_run is a warm-up (allocation, kernel choice) and is left out. A node's total
    is its median call times its calls: one call stretched by another process on the host (a
    50 ms preemption against a model of a fraction of a millisecond) would otherwise outweigh
    every other run and move every node's share. `parent` names the If (Loop, Scan) a node of
    its branch ran inside, whose time includes this node's; '' for a node of the main graph.
    """
    runs = sorted(
        (e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
        key=lambda e: e["ts"],
    )
    cutoff = runs[0]["ts"] + runs[0]["dur"] if len(runs) > 1 else -1
    nodes: dict[str, dict[str, Any]] = {}
    durations: dict[str, list[float]] = {}
    kernels = [
        e
        for e in events
        if e.get("cat") == "Node"
        and str(e.get("name", "")).endswith("_kernel_time")
        and e["ts"] >= cutoff
    ]
    inside: dict[str, Counter[str]] = {}
    for event, parent in zip(kernels, _enclosing(kernels), strict=True):
        name = str(event["name"])
        args = event.get("args", {})
        key = name[: -len("_kernel_time")]
        entry = nodes.setdefault(
            key,
            {"op": args.get("op_name", "?"), "provider": args.get("provider", "?")},
        )
        durations.setdefault(key, []).append(float(event.get("dur", 0)))
        inside.setdefault(key, Counter())[parent] += 1
    for key, entry in nodes.items():
        entry["calls"] = len(durations[key])
        entry["total_us"] = statistics.median(durations[key]) * entry["calls"]
        # the parent of most calls: a main-graph node of under 1 us that ends in the microsecond
        # an If starts in may read as inside it once, never in every run
        entry["parent"] = inside[key].most_common(1)[0][0]
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
