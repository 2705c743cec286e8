"""Every uploaded node one fused runtime node ran, traced through the graph the runtime ran.

A runtime that fuses Conv + Relu into one kernel names it after one end of the fusion only:
ONNX Runtime's NCHWc Conv 'x0_nchwc' is named after the Relu's output tensor, so matching by
name (profile.SourceIndex.match) finds the Relu and the Conv, which did almost all the work,
got none of the time. The rest of a fusion is found here from the tensors: an uploaded tensor
that the runtime's graph no longer holds was computed inside a kernel, so the nodes on both sides
of it ran in the same runtime node. Growth stops at tensors the runtime's graph holds, at tensors
read by several nodes (something had to keep them), at a second compute node (a fusion is one
Conv, MatMul or pool and the cheap element-wise ops around it), and at nodes another runtime node
ran. Conversions the runtime inserted (ReorderOutput, QuantizeLinear...) fuse nothing: they count
with the runtime node whose data they convert.

The time of a node that ran several uploaded nodes is then split among them by their FLOPs at
the profiled shapes (source_flops; Profile.parts), so a fused Relu gets its few element-wise
FLOPs' worth and the Conv the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import numpy as np
import onnx

from backend.models.cost import ELEMENTWISE, FREE, PER_ELEMENT, model_cost


class UploadGraph(Protocol):
    """What fusion reads of the uploaded graph: profile.SourceIndex (named here, not imported,
    since profile.py imports this module)."""

    ops: dict[str, str]
    producer: dict[str, str]
    consumers: dict[str, list[str]]

    def upload_tensor(self, name: str) -> str | None: ...


LAYOUT_OPS = ("ReorderInput", "ReorderOutput")  # ONNX Runtime's NCHWc layout changes
CHEAP_OPS = frozenset(ELEMENTWISE) | frozenset(PER_ELEMENT) | frozenset(FREE)


class _Grower:
    """The uploaded graph as tensors (producer, consumers), and what the runtime still holds."""

    def __init__(
        self,
        ops: dict[str, str],
        producer: dict[str, str],
        consumers: dict[str, list[str]],
        to_upload: Callable[[str], str | None],
        runtime_tensors: Iterable[str],
    ) -> None:
        self.ops, self.producer, self.consumers = ops, producer, consumers
        self.inputs: dict[str, list[str]] = {n: [] for n in ops}
        self.outputs: dict[str, list[str]] = {n: [] for n in ops}
        for tensor, node in producer.items():
            self.outputs[node].append(tensor)
        for tensor, readers in consumers.items():
            for node in readers:
                self.inputs[node].append(tensor)
        self.held = {u for t in runtime_tensors if (u := to_upload(t))}

    def _computes(self, node: str) -> bool:
        return self.ops.get(node) not in CHEAP_OPS

    def _through(self, tensor: str, boundary: set[str]) -> bool:
        """Whether a fusion can pass this tensor: held by no one, read by one node only."""
        return (
            tensor not in self.held
            and tensor not in boundary
            and len(self.consumers.get(tensor, [])) == 1
        )

    def grow(self, start: list[str], boundary: set[str], taken: Callable[[str], bool]) -> list[str]:
        """The start nodes and every node joined to them through tensors no one else holds."""
        region = list(dict.fromkeys(start))
        computes = sum(self._computes(n) for n in region)
        changed = True
        while changed:
            changed = False
            for node in list(region):
                ins = [t for t in self.inputs[node] if self._through(t, boundary)]
                outs = [t for t in self.outputs[node] if self._through(t, boundary)]
                near = [self.producer.get(t) for t in ins] + [self.consumers[t][0] for t in outs]
                for other in near:
                    if other is None or other in region or taken(other):
                        continue
                    if self._computes(other) and computes:
                        continue  # a second Conv/MatMul is another kernel
                    region.append(other)
                    computes += self._computes(other)
                    changed = True
        return region


def fused_sources(
    ops_run: dict[str, str],
    optimized: onnx.ModelProto | None,
    anchors: dict[str, list[str]],
    index: UploadGraph,
    conversions: Iterable[str],
) -> dict[str, list[str]]:
    """{runtime node: uploaded nodes it ran, in upload order}, from each node's anchors (what
    its name or tensors matched), grown through the tensors its fusion made disappear from the
    runtime's optimized graph. Nodes are taken in that graph's order (producers first), so a
    node an earlier kernel ran is never taken by a later one; ops_run: {runtime node: op type},
    where an op in conversions or LAYOUT_OPS only converts data and fuses nothing.
    """
    graph = list(optimized.graph.node) if optimized is not None else []
    wiring = {n.name: (list(n.input), list(n.output)) for n in graph}
    order = list(dict.fromkeys([*(n.name for n in graph if n.name in ops_run), *ops_run]))
    converts = {n for n, op in ops_run.items() if op in (*conversions, *LAYOUT_OPS)}
    held = [t for n in graph for t in (*n.input, *n.output)]
    ops, to_upload = index.ops, index.upload_tensor
    grower = _Grower(ops, index.producer, index.consumers, to_upload, held)
    owner: dict[str, str] = {}  # uploaded node -> the runtime node that ran it
    strong = {a: name for name in order if name not in converts for a in anchors.get(name, [])}
    found: dict[str, list[str]] = {}
    for name in order:
        start = anchors.get(name, [])
        if name in converts or not start or name not in wiring:
            found[name] = start
            continue
        ins, outs = wiring[name]
        boundary = {u for t in (*ins, *outs) if (u := to_upload(t))}

        def taken(node: str, me: str = name) -> bool:
            return owner.get(node, me) != me or strong.get(node, me) != me

        region = grower.grow(start, boundary, taken)
        for node in region:
            owner.setdefault(node, name)
        found[name] = region
    for name in converts:  # ReorderOutput of the Conv+Relu kernel counts with that kernel
        owners = {owner.get(a) for a in found.get(name, [])}
        if len(owners) == 1 and (kernel := owners.pop()) is not None:
            found[name] = found[kernel]
    position = {n: i for i, n in enumerate(ops)}
    return {k: sorted(v, key=lambda n: position.get(n, len(position))) for k, v in found.items()}


def flop_parts(sources: list[str], flops: dict[str, int]) -> list[float]:
    """Each source's part of a runtime node's time: by FLOPs where every one was counted and
    they add up to more than 0, else equal parts."""
    counted = [flops.get(s) for s in sources]
    known = [f for f in counted if f is not None]
    if len(sources) > 1 and len(known) == len(sources) and sum(known) > 0:
        return [f / sum(known) for f in known]
    return [1.0 / len(sources)] * len(sources)


def split_by_flops(sources: list[str], flops: dict[str, int]) -> bool:
    """Whether flop_parts splits these sources by FLOPs (not in equal parts)."""
    counted = [flops.get(s) for s in sources]
    return len(sources) > 1 and None not in counted and sum(f or 0 for f in counted) > 0


def source_flops(
    source: onnx.ModelProto, feed: dict[str, np.ndarray], wanted: Iterable[str]
) -> dict[str, int]:
    """FLOPs of the wanted uploaded nodes at the profiled inputs' shapes, counted by
    backend.models.cost; {} where the graph cannot be counted (the split is then equal, and the
    Graph page says so)."""
    wanted = set(wanted)
    if not wanted:
        return {}
    model = onnx.ModelProto.FromString(source.SerializeToString())
    for value in model.graph.input:
        shape = feed[value.name].shape if value.name in feed else None
        dims = value.type.tensor_type.shape.dim
        if shape is not None and len(dims) == len(shape):
            for dim, size in zip(dims, shape, strict=True):
                dim.dim_value = int(size)
    try:
        cost = model_cost(model)
    except Exception:  # noqa: BLE001 - a refinement of the split; the profile stands without it
        return {}
    return {n.name: n.flops for n in cost.nodes if n.name in wanted and n.counted}
