"""Real node placement: which execution provider ONNX Runtime actually gave each node.

The session (backend.runtimes.placement_session) opens the uploaded model, so it runs where every
measurement does: in a sandboxed child (backend/launch/sandbox.py) that sees the model's folder
read-only and returns JSON, never a pickle; without a working sandbox the placement says why and
no session is opened. ORT's C++ logger writes the "Node placements" block, which the child parses
into a Placement. Graph optimizations are disabled so that the nodes ORT places are the model's
own nodes, not fused replacements.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from backend.compat.facts import read_nodes, unique_names
from backend.launch import sandbox
from backend.launch.children import call_in_child
from backend.launch.limits import ChildLimits
from backend.runtimes import onnxruntime_provider_name, placement_session

_PLACED = re.compile(r"placed on \[(\w+)\]\.\s*Number of nodes:\s*(\d+)")
_ALL_PLACED = re.compile(r"All nodes placed on \[(\w+)\]\.\s*Number of nodes:\s*(\d+)")
_NODE_LINE = re.compile(r"^\s*(\w[\w.:]*) \((.*)\)\s*$")
_LOG_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\S* \[[^\]]*\] ?(.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Placement:
    """Where ONNX Runtime put each node when asked for one provider (CPU as the fallback)."""

    requested: str  # the ORT provider name asked for, e.g. CUDAExecutionProvider
    session_providers: list[str] = field(default_factory=list)  # what the session really has
    nodes: dict[str, str] = field(default_factory=dict)  # node name -> provider that ran it
    counts: dict[str, int] = field(default_factory=dict)  # provider -> the graph's nodes on it
    error: str | None = None  # the session could not be created: the runtime's own message
    method: str = "log"
    inserted: int = 0  # nodes ONNX Runtime added (copies between devices), not in the graph

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def requested_active(self) -> bool:
        return self.requested in self.session_providers

    def fallbacks(self) -> list[str]:
        """Nodes that ran somewhere other than the requested provider."""
        return [n for n, p in self.nodes.items() if p != self.requested]

    def to_dict(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "session_providers": self.session_providers,
            "nodes": self.nodes,
            "counts": self.counts,
            "error": self.error,
            "method": self.method,
            "inserted": self.inserted,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Placement:
        return cls(**data)

    @classmethod
    def from_child(cls, data: Any) -> Placement:
        """What a sandboxed child returned, checked field by field (a child that an uploaded
        model took over may answer anything): ValueError when it is not a placement."""
        strings = (str, type(None))
        checks = {
            "requested": lambda v: isinstance(v, str),
            "session_providers": lambda v: (
                isinstance(v, list) and all(isinstance(p, str) for p in v)
            ),
            "nodes": lambda v: isinstance(v, dict) and all(isinstance(p, str) for p in v.values()),
            "counts": lambda v: (
                isinstance(v, dict)
                and all(isinstance(n, int) and not isinstance(n, bool) for n in v.values())
            ),
            "error": lambda v: isinstance(v, strings),
            "method": lambda v: isinstance(v, str),
            "inserted": lambda v: isinstance(v, int) and not isinstance(v, bool),
        }
        if not isinstance(data, dict) or set(data) != set(checks):
            raise ValueError("not the fields of a placement")
        wrong = [name for name, ok in checks.items() if not ok(data[name])]
        if wrong:
            raise ValueError(f"{wrong[0]} is not of its type")
        return cls(**data)


def parse_placement_log(text: str) -> tuple[dict[str, str], dict[str, int], str | None]:
    """Parse ORT's verbose 'Node placements' block.

    Returns (node name -> provider, provider -> count, provider that took every node or None).
    ORT prints either " All nodes placed on [X]. Number of nodes: n" or, per provider,
    " Node(s) placed on [X]. Number of nodes: n" followed by "  OpType (node name)" lines.
    """
    nodes: dict[str, str] = {}
    counts: dict[str, int] = {}
    everything_on: str | None = None
    current: str | None = None
    for raw in _ANSI.sub("", text).splitlines():
        # a node line may be its own log entry: "<time> [V:onnxruntime:, f.cc:1 F]  Op (name)"
        prefixed = _LOG_ENTRY.match(raw)
        line = prefixed.group(1) if prefixed else raw
        every = _ALL_PLACED.search(line)
        if every:
            everything_on = every.group(1)
            counts[everything_on] = int(every.group(2))
            current = None
            continue
        placed = _PLACED.search(line)
        if placed:
            current = placed.group(1)
            counts[current] = counts.get(current, 0) + int(placed.group(2))
            continue
        if current is not None:
            node = _NODE_LINE.match(line)
            if node:
                nodes[node.group(2)] = current
            elif prefixed or not line.strip():
                current = None
    return nodes, counts, everything_on


def read_placement(model_path: Path, provider: str, timeout: float = 300.0) -> Placement:
    """Create a session for `provider` (with CPU fallback) in a sandboxed child and read its
    placement; a placement that could not be read says why in `error`."""
    native = onnxruntime_provider_name(provider)
    refused = sandbox.needed_for("a session opens the uploaded model")
    if refused:
        return Placement(native, error=f"not placed: {refused}")
    gpu = native != "CPUExecutionProvider"
    path = Path(model_path).resolve()  # its folder holds the external weights: bound read-only
    outcome = call_in_child(
        "backend.compat.placement:placement_in_child",
        str(path),
        native,
        timeout_s=timeout,
        what="The placement child",
        sandboxed=True,
        binds=sandbox.Binds.of(read_only=[path.parent], gpu=gpu),
        limits=ChildLimits.from_settings(gpu=gpu),
    )
    if not outcome.ok:  # a crash, a time-out, or a traceback whose last line says what it was
        last = (outcome.error or "").strip().splitlines()[-1:] or ["no reason given"]
        return Placement(native, error=f"the placement child failed: {last[0]}")
    try:
        return Placement.from_child(outcome.value)
    except (TypeError, ValueError) as exc:
        return Placement(native, error=f"the placement child answered what does not read ({exc})")


def placement_in_child(model_path: str, native: str) -> dict[str, Any]:
    """In the sandboxed child: the graph with every node named (ORT's log names nodes), opened
    from memory with its external weights read where they lie, so nothing is copied."""
    model = onnx.load(model_path, load_external_data=False)
    names = [f.name for f in read_nodes(model)]
    graph = unique_names(model).SerializeToString()
    report = placement_session(graph, native, str(Path(model_path).parent))
    if report["error"]:
        return Placement(native, error=report["error"]).to_dict()
    return placement_from_log(native, report["providers"], report["log"], names).to_dict()


def placement_from_log(
    requested: str, providers: list[str], log: str, names: list[str]
) -> Placement:
    """The graph's own nodes per provider, from ORT's log of a session on the graph named
    `names`. ORT counts the copies it inserts between devices (MemcpyToHost, MemcpyFromHost)
    among its nodes; they are kept apart, so a 3-node graph never reads as 5 placed nodes."""
    nodes, logged, everything_on = parse_placement_log(log)
    if everything_on is not None:
        nodes = dict.fromkeys(names, everything_on)
    known = set(names)
    own = {n: p for n, p in nodes.items() if n in known}
    on = Counter(own.values())
    counts = {p: on[p] for p in logged if on[p]} if own else logged
    return Placement(
        requested=requested,
        session_providers=providers,
        nodes=own,
        counts=counts,
        inserted=max(0, sum(logged.values()) - sum(counts.values())),
    )


def described(placement: dict[str, Any]) -> str:
    """A stored placement in one line: the runtime's error, or the nodes per provider."""
    if placement.get("error"):
        return str(placement["error"])
    line = ", ".join(f"{p}: {n}" for p, n in placement.get("counts", {}).items())
    requested, got = placement.get("requested"), placement.get("session_providers") or []
    if got and requested not in got:  # the provider did not start: no node could go to it
        line = f"{requested} did not start in the session, which got {', '.join(got)}: {line}"
    inserted = placement.get("inserted", 0)
    return line + (f" (+{inserted} copies ONNX Runtime put between devices)" if inserted else "")
