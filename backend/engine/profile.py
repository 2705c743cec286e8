"""Per-node time from the runtime's own profiler, mapped back to the uploaded model's nodes.

The profile is a separate pass on its own session, run after the clean timed loop: profiling adds
work to every node, so its times are only ever used as shares, never as the latency.

Why long: one record (Profile) with the accounting every view reads (shares, own time inside an
If's branches, op types) and the one mapping of runtime nodes to the uploaded nodes it is built by.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from backend.engine.fusion import flop_parts, fused_sources, source_flops
from backend.engine.ortrace import PROFILE_RUNS, parse_trace, trace_events
from backend.models.nodenames import node_name
from backend.runtimes import onnxruntime_provider_name
from backend.runtimes.base import SessionOptions

log = logging.getLogger(__name__)

QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
KEPT_IN_FP32 = "optiboard.kept_in_fp32"  # model metadata: nodes left unquantized on purpose
KEPT_CLIP = "_clipped_for_"  # in the names of those Clips (backend.engine.calibration)
# OpenVINO's names: FakeQuantize is its Q/DQ, Reorder its layout/precision change, Convert a cast
OV_CONVERSION_OPS = ("FakeQuantize", "Reorder", "Convert")
# what converts between precisions, layouts or devices rather than computing (evidence.py, charts)
CONVERSION_OPS = (
    *QDQ_OPS,
    "DynamicQuantizeLinear",
    "Cast",
    "MemcpyToHost",
    "MemcpyFromHost",
    "Transpose",
    *OV_CONVERSION_OPS,
)
# names the quantizer and ORT's optimizers append to a node or tensor they derive from another
_DERIVED = re.compile(
    r"(_token_\d+|_QuantizeLinear_Output|_DequantizeLinear_Output|_QuantizeLinear"
    r"|_DequantizeLinear|_quantized|_out\d+|_output_\d+|_nchwc|_Cast)$"
)


@dataclass
class NodeProfile:
    """One node as the runtime ran it, and the uploaded model's nodes it stands for."""

    name: str
    op_type: str  # as run, e.g. QLinearConv
    provider: str
    calls: int
    total_us: float
    source_nodes: list[str] = field(default_factory=list)
    source_ops: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    precision: str = ""  # where the runtime reports it per layer (OpenVINO: 'i8', 'f32', ...)
    # the If (Loop, Scan) this branch node ran inside, whose time holds its (ortrace._enclosing)
    parent: str = ""

    @property
    def per_run_us(self) -> float:
        return self.total_us / max(self.calls, 1)


@dataclass
class Profile:
    """Every node's time over `runs` profiled runs (the first, warm-up run left out)."""

    runs: int
    provider: str  # the provider the configuration asked for, as the runtime names it
    nodes: list[NodeProfile] = field(default_factory=list)
    kept_in_fp32: list[str] = field(default_factory=list)  # left unquantized on purpose
    # FLOPs at the profiled shapes of every uploaded node a fused runtime node ran (fusion.py)
    source_flops: dict[str, int] = field(default_factory=dict)
    source_types: dict[str, str] = field(default_factory=dict)  # their op types
    fusions_traced: bool = False  # False: stored before fused kernels were traced to every node

    def is_kept(self, node: NodeProfile) -> bool:
        """Left in FP32 on purpose, or one of the Clips that feed such a node its float input."""
        if node.op_type in QDQ_OPS:  # a conversion next to a kept node is not kept in FP32
            return False
        kept = set(self.kept_in_fp32)
        return any(s in kept for s in _stages(node.name)) or KEPT_CLIP in node.name

    def parts(self, node: NodeProfile) -> list[tuple[str, float]]:
        """(uploaded node, its part of this runtime node's time): by counted FLOPs (fusion.py).

        The one mapping every view reads (Hottest nodes, Against FP32, the Graph page's time
        overlay and variant diff). None for a runtime node traced to no uploaded node: its own
        name is no uploaded node's (a node of an If's branch is named in its body, 'Neg_0',
        where the main graph may hold another 'Neg_0'), and its time is already inside its
        parent's (ORT times the If around its branch)."""
        sources = node.source_nodes
        if not sources:
            return []
        return list(zip(sources, flop_parts(sources, self.source_flops), strict=True))

    def main_source(self, node: NodeProfile) -> tuple[str, str] | None:
        """(uploaded node, op) a fused runtime node mostly ran: its largest part (the Conv of a
        Conv+Relu kernel); None where it ran one op type, or the profile does not know."""
        if len(node.source_ops) < 2 or not self.fusions_traced:
            return None
        name = max(self.parts(node), key=lambda part: part[1])[0]
        return (name, self.source_types[name]) if name in self.source_types else None

    def _time_of(self, nodes: Iterable[NodeProfile]) -> float:
        """These nodes' time, each once: one inside a picked If (Loop) is in the If's already."""
        parent = {n.name: n.parent for n in self.nodes}
        picked = {n.name: n for n in nodes}

        def held(name: str, hops: int = 0) -> bool:
            up = parent.get(name, "")
            return bool(up) and hops < len(parent) and (up in picked or held(up, hops + 1))

        return sum(n.total_us for n in picked.values() if not held(n.name))

    @property
    def total_us(self) -> float:
        """The session's node time, a branch node's counted once (in its If's)."""
        return self._time_of(self.nodes)

    def branch_us(self) -> dict[str, float]:
        """{If (Loop, Scan): the time of the branch nodes it ran directly}."""
        inside: dict[str, float] = defaultdict(float)
        for node in (n for n in self.nodes if n.parent):
            inside[node.parent] += node.total_us
        return inside

    def own_us(self, node: NodeProfile, branch_us: dict[str, float] | None = None) -> float:
        """Its time less its branch nodes' (an If's own overhead); any other node's whole time."""
        inside = (self.branch_us() if branch_us is None else branch_us).get(node.name, 0.0)
        return max(node.total_us - inside, 0.0)

    def share(self, nodes: Iterable[NodeProfile]) -> float:
        total = self.total_us
        return self._time_of(nodes) / total if total else 0.0

    def of_op(self, *op_types: str) -> list[NodeProfile]:
        return [n for n in self.nodes if n.op_type in op_types]

    def by_op_type(self) -> dict[str, dict[str, float]]:
        """{op type: {nodes, total_us, share}}, slowest first, of each node's own time."""
        groups: dict[str, list[NodeProfile]] = defaultdict(list)
        for node in self.nodes:
            groups[node.op_type].append(node)
        total, branch_us = self.total_us, self.branch_us()
        rows = {}
        for op, ns in groups.items():
            own = sum(self.own_us(n, branch_us) for n in ns)
            rows[op] = {"nodes": len(ns), "total_us": own, "share": own / total if total else 0.0}
        return dict(sorted(rows.items(), key=lambda kv: -kv[1]["total_us"]))

    def off_provider(self) -> list[NodeProfile]:
        """Nodes the runtime placed on another provider than the one asked for."""
        return [n for n in self.nodes if n.provider != self.provider]

    def hottest(self, count: int = 10) -> list[NodeProfile]:
        return sorted(self.nodes, key=lambda n: -n.total_us)[:count]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        nodes = [NodeProfile(**n) for n in data.get("nodes", [])]
        kept = list(data.get("kept_in_fp32") or [])
        flops = {str(k): int(v) for k, v in (data.get("source_flops") or {}).items()}
        types = {str(k): str(v) for k, v in (data.get("source_types") or {}).items()}
        traced = bool(data.get("fusions_traced", False))
        return cls(int(data["runs"]), str(data["provider"]), nodes, kept, flops, types, traced)

    def save(self, path: Path) -> Path:
        Path(path).write_text(json.dumps(self.to_dict()))
        return Path(path)

    @classmethod
    def load(cls, path: Path) -> Profile:
        return cls.from_dict(json.loads(Path(path).read_text()))


def name_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give every unnamed node the name '<op>_<index>' (ORT's own scheme), in place.

    Variants are built from a named copy, so the quantizer, ORT's optimizers and the profiler all
    carry names that lead back to the uploaded model.
    """
    for index, node in enumerate(model.graph.node):
        node.name = node_name(node, index)
    return model


def _stages(name: str) -> list[str]:
    """The name, then each name left by stripping one more derived suffix: a torch tensor
    '/conv/Conv_output_0_DequantizeLinear_Output' is '/conv/Conv_output_0' (a tensor of the
    upload) before it is '/conv/Conv' (a node's name, not a tensor)."""
    found = [name]
    while (stripped := _DERIVED.sub("", found[-1])) != found[-1]:
        found.append(stripped)
    return found


def name_stages(name: str) -> list[str]:
    """_stages, for readers outside profiles (backend/graphview's variant diff)."""
    return _stages(name)


def _base(name: str) -> str:
    return _stages(name)[-1]


def _heads(name: str) -> list[str]:
    """'/enc/dense/MatMul/MatMulAddFusion' -> '/enc/dense/MatMul', '/enc/dense', ...: ORT names
    a fused node after the first node it absorbed, with the fusion after a slash."""
    parts = name.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1) if "/".join(parts[:i])]


@dataclass
class SourceIndex:
    """The uploaded model's node names, op types, and who produces and consumes each tensor."""

    ops: dict[str, str]
    producer: dict[str, str]
    consumers: dict[str, list[str]]

    @classmethod
    def of(cls, model: onnx.ModelProto) -> SourceIndex:
        named = name_nodes(onnx.ModelProto.FromString(model.SerializeToString()))
        producer: dict[str, str] = {}
        consumers: dict[str, list[str]] = defaultdict(list)
        for node in named.graph.node:
            for out in node.output:
                producer[out] = node.name
            for inp in node.input:
                consumers[inp].append(node.name)
        return cls({n.name: n.op_type for n in named.graph.node}, producer, dict(consumers))

    def upload_tensor(self, name: str) -> str | None:
        """The uploaded tensor a runtime tensor is (its name, or one with derived suffixes)."""
        return next((s for s in _stages(name) if s in self.producer or s in self.consumers), None)

    def match(self, name: str, inputs: list[str], outputs: list[str]) -> list[str]:
        """Source nodes for a runtime node: by name where it survived, else through tensors."""
        for candidate in _stages(name):
            if candidate in self.ops:
                return [candidate]
        for head in _heads(name):  # ORT's fusions: 'dense/MatMulAddFusion' is dense and its Add
            if head in self.ops:
                fused = [self.producer[t] for t in outputs if self.producer.get(t, head) != head]
                return [head, *dict.fromkeys(fused)]
        # through tensors, the least stripped name first: a derived name's earlier stage may be
        # the upload's own tensor, its last stage a node name that is no tensor at all
        for tensor in [s for t in outputs for s in _stages(t)] + _stages(name):
            if tensor in self.producer:
                return [self.producer[tensor]]
        for tensor in [s for t in inputs for s in _stages(t)] + _stages(name):
            if tensor in self.consumers:
                return list(self.consumers[tensor])
        return []


@dataclass
class _Wiring:
    """Inputs and outputs of each node of one graph, and the producer of each tensor."""

    nodes: dict[str, tuple[list[str], list[str]]]
    producer: dict[str, str]

    @classmethod
    def of(cls, model: onnx.ModelProto | None) -> _Wiring:
        graph_nodes = model.graph.node if model is not None else []
        nodes = {n.name: (list(n.input), list(n.output)) for n in graph_nodes}
        producer = {t: n.name for n in graph_nodes for t in n.output}
        return cls(nodes, producer)


def _resolve(name: str, graphs: list[_Wiring], index: SourceIndex, depth: int = 0) -> list[str]:
    """Source nodes of a runtime node: through the built variant's original tensor names first,
    then the runtime's graph, then (up to 3 hops) the node feeding it, for inserted nodes."""
    wired = [g.nodes[name] for g in graphs if name in g.nodes]
    for inputs, outputs in wired or [([], [])]:
        if found := index.match(name, inputs, outputs):
            return found
    if depth < 3:
        for graph, (inputs, _) in ((g, g.nodes[name]) for g in graphs if name in g.nodes):
            for tensor in inputs:
                upstream = graph.producer.get(tensor)
                if upstream and upstream != name:
                    if found := _resolve(upstream, graphs, index, depth + 1):
                        return found
    return []


def mapped_node(name: str, matched: list[str], index: SourceIndex, **timing: Any) -> NodeProfile:
    """One timed runtime node (ORT trace event or OpenVINO layer) with the uploaded nodes it ran."""
    ops = sorted({index.ops[m] for m in matched})
    return NodeProfile(name=name, source_nodes=matched, source_ops=ops, **timing)


def kept_in_fp32(built: onnx.ModelProto | None) -> list[str]:
    """Nodes the variant's build kept in FP32, from the metadata the passes wrote into it."""
    props = {p.key: p.value for p in built.metadata_props} if built is not None else {}
    return json.loads(props.get(KEPT_IN_FP32, "[]"))


def build_profile(
    events: list[dict[str, Any]],
    provider: str,
    optimized: onnx.ModelProto | None,
    source: onnx.ModelProto,
    built: onnx.ModelProto | None = None,
    feed: dict[str, np.ndarray] | None = None,
) -> Profile:
    """A Profile from a trace, the graph the runtime ran, the variant built, and the upload;
    with the profiled feed, a fused node's time is split among its nodes by FLOPs at its shapes."""
    runs, timed = parse_trace(events)
    graphs = [_Wiring.of(built), _Wiring.of(optimized)]
    index = SourceIndex.of(source)
    anchors = {name: _resolve(name, graphs, index) for name in timed}
    ops_run = {name: str(entry["op"]) for name, entry in timed.items()}
    sources = fused_sources(ops_run, optimized, anchors, index, CONVERSION_OPS)
    nodes = []
    for name, entry in timed.items():
        inputs, outputs = graphs[1].nodes.get(name, ([], []))
        nodes.append(
            mapped_node(
                name,
                sources[name],
                index,
                op_type=entry["op"],
                provider=entry["provider"],
                calls=entry["calls"],
                total_us=entry["total_us"],
                inputs=inputs,
                outputs=outputs,
                parent=entry["parent"],
            )
        )
    fused = {s: index.ops[s] for n in nodes if len(n.source_nodes) > 1 for s in n.source_nodes}
    flops = source_flops(source, feed, fused) if feed is not None else {}
    return Profile(runs, provider, nodes, kept_in_fp32(built), flops, fused, fusions_traced=True)


def profile_model(
    model_path: Path,
    source: onnx.ModelProto,
    options: SessionOptions,
    feed: dict[str, np.ndarray],
    runs: int = PROFILE_RUNS,
    runtime: str = "onnxruntime",
) -> Profile:
    """Open a profiling session of its own, run `runs` + 1 times, and map the trace to source."""
    events, optimized = trace_events(model_path, options, feed, runs, runtime)
    built = onnx.load(str(model_path), load_external_data=False)
    native = onnxruntime_provider_name(options.configuration.provider)
    return build_profile(events, native, optimized, source, built, feed)


MAX_PROFILE_BYTES = 256 << 20  # as a child's JSON answer (launch/outcomes.RESULT_CAP)
MAX_STEM_BYTES = 120  # file names stop at 255 bytes; keys with node names go far past that


def artifact_stem(config_key: str) -> str:
    """The file name (without suffix) of a configuration's artifacts: its key with '/' made
    '_' where that is short, else the key's first 60 characters and a short hash of the whole
    key. A mixed-precision key carries every node kept in FP32 (a torch export names them
    '/encoder/layer.0/attention/...'), which would pass the file system's 255-byte limit."""
    stem = config_key.replace("/", "_")
    if len(stem.encode()) <= MAX_STEM_BYTES:
        return stem
    digest = hashlib.sha256(config_key.encode()).hexdigest()[:16]
    return f"{stem[:60]}-{digest}"


def write_profile(
    model_path: Path,
    source_path: Path,
    options: SessionOptions,
    feed: dict[str, np.ndarray],
    out_dir: Path,
    config_key: str,
    profiler: Callable[..., Profile] | None = None,
) -> Path:
    """Profile one configuration's variant and leave the JSON where the parent stores artifacts.

    profiler: ONNX Runtime's (profile_model) unless another runtime's is given, e.g.
    backend.engine.ovprofile.profile_openvino for OpenVINO's performance counters.
    """
    source = onnx.load(str(source_path), load_external_data=False)
    profile = (profiler or profile_model)(model_path, source, options, feed)
    out = Path(out_dir) / f"{artifact_stem(config_key)}.profile.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    return profile.save(out)


def untraced_note(profile: Profile, subject: str = "This profile was") -> str:
    """Where a profile was stored before fused kernels were traced to every node they ran
    (fusion.py), the sentence asking to profile again: its time per uploaded node keeps the old
    op mapping. '' for a profile stored since. The one test of it, for the Graph page's overlay
    and the Jobs page; `subject` names what was stored ("The profiles of A, B were")."""
    return "" if profile.fusions_traced else untraced_sentence(subject)


def untraced_sentence(subject: str) -> str:
    """untraced_note's sentence, of profiles already known to be untraced."""
    return (
        f"{subject} stored before fused kernels were traced to every node they ran: a fused "
        "kernel's time may sit on one of its nodes only (e.g. the Relu of a Conv+Relu kernel). "
        "Profile the configuration again for a faithful picture."
    )


def stored_profile(telemetry: dict[str, Any]) -> Profile | None:
    """The profile a stored result points to (telemetry['profile_sha256']), or None."""
    from backend.models import library

    sha256 = telemetry.get("profile_sha256")
    return read_profile(library.artifact_path(sha256)) if sha256 else None


def read_profile(path: Path) -> Profile | None:
    """The profile in `path`, or None, with a log line, for a file no profile of ours can be:
    its measurement child wrote it, one an upload took over could write anything up to its file
    limit, and the worker and the pages read it."""
    size = Path(path).stat().st_size
    if size > MAX_PROFILE_BYTES:
        log.warning("profile %s is %d bytes, past %d: not read", path, size, MAX_PROFILE_BYTES)
        return None
    try:
        return Profile.load(path)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning("profile %s does not read as one (%s): not used", path, exc)
        return None
