"""OpenVINO's per-layer performance counters as a Profile, mapped back to the uploaded nodes.

The same shape as ONNX Runtime's profile (backend.engine.profile), so the evidence lines, the
per-node bars and the hottest-node links work for OpenVINO results too. It is a separate pass on
its own compiled model after the clean timing, like ONNX Runtime's.

OpenVINO fuses several ONNX nodes into one layer (Conv + HardSwish + the next QuantizeLinear in
one int8 Convolution); the compiled graph names them in rt_info originalLayersNames, which leads
each layer back to the uploaded nodes. Layers made only of the variant's Q/DQ nodes are called
FakeQuantize (what OpenVINO's ONNX frontend turns a QuantizeLinear/DequantizeLinear into), so
they count as conversions whatever kernel ran them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from backend.engine.fusion import source_flops
from backend.engine.profile import PROFILE_RUNS, Profile, SourceIndex, kept_in_fp32, mapped_node
from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions

_QDQ = ("QuantizeLinear", "DequantizeLinear")
_HOPS = 3  # how far back an inserted layer (Reorder) looks for the uploaded node it serves


def kernel_precision(exec_type: str) -> str:
    """'brgconv_avx512_1x1_I8' -> 'i8', 'jit_avx512_f32' -> 'f32': the precision the kernel ran."""
    return exec_type.rsplit("_", 1)[-1].lower() if "_" in exec_type else ""


def _sources(
    layer: dict[str, Any], index: SourceIndex, layers: dict[str, dict[str, Any]], depth: int = 0
) -> list[str]:
    """Uploaded nodes of a layer: through the original ops fused into it, else its input."""
    found: list[str] = []
    for name in layer["original"]:
        found += [m for m in index.match(name, [], []) if m not in found]
    if found or depth >= _HOPS:
        return found
    for upstream in layer["inputs"]:
        if upstream in layers and (hit := _sources(layers[upstream], index, layers, depth + 1)):
            return hit
    return []


def build_ov_profile(
    timed: dict[str, dict[str, Any]],
    graph: list[dict[str, Any]],
    runs: int,
    device: str,
    source: onnx.ModelProto,
    built: onnx.ModelProto,
    feed: dict[str, np.ndarray] | None = None,
) -> Profile:
    """A Profile from summed counters ({layer: type, exec_type, total_us}) and compiled graph;
    with the profiled feed, a fused layer's time is split among its nodes by their FLOPs."""
    index = SourceIndex.of(source)
    position = {n: i for i, n in enumerate(index.ops)}  # a fusion's root (Conv) first
    built_ops = {n.name: n.op_type for n in built.graph.node}
    layers = {layer["name"]: layer for layer in graph}
    nodes = []
    for name, entry in timed.items():
        layer = layers.get(name, {"original": [], "inputs": []})
        original = layer["original"]
        only_qdq = bool(original) and all(
            built_ops.get(o) in _QDQ or o.startswith(_QDQ) for o in original
        )
        nodes.append(
            mapped_node(
                name,
                sorted(_sources(layer, index, layers), key=position.__getitem__),
                index,
                op_type="FakeQuantize" if only_qdq else entry["type"],
                provider=device,
                calls=runs,
                total_us=entry["total_us"],
                inputs=list(layer["inputs"]),
                outputs=[name],
                precision=kernel_precision(entry["exec_type"]),
            )
        )
    fused = {s: index.ops[s] for n in nodes if len(n.source_nodes) > 1 for s in n.source_nodes}
    flops = source_flops(source, feed, fused) if feed is not None else {}
    return Profile(runs, device, nodes, kept_in_fp32(built), flops, fused, fusions_traced=True)


def profile_openvino(
    model_path: Path,
    source: onnx.ModelProto,
    options: SessionOptions,
    feed: dict[str, np.ndarray],
    runs: int = PROFILE_RUNS,
) -> Profile:
    """Compile with performance counters on, run once to warm up, then sum `runs` runs' counters."""
    counted = replace(
        options,
        optimized_model_path=None,
        profile_prefix=None,
        perf_counters=True,
    )
    timed: dict[str, dict[str, Any]] = defaultdict(lambda: {"total_us": 0.0})
    with get_runtime("openvino").open(Path(model_path), counted) as runner:
        runner.infer(feed)  # allocation and kernel choice, left out like ORT's first run
        for _ in range(runs):
            runner.infer(feed)
            for layer in runner.layer_profile():
                entry = timed[layer["node"]]
                entry["type"], entry["exec_type"] = layer["type"], layer["exec_type"]
                entry["total_us"] += layer["real_time_us"]
        graph = runner.execution_graph()
    built = onnx.load(str(model_path), load_external_data=False)
    # OpenVINO's device name: cpu -> CPU, gpu -> GPU
    device = options.configuration.provider.upper()
    return build_ov_profile(dict(timed), graph, runs, device, source, built, feed)
