"""Real node placement: which execution provider ONNX Runtime actually gave each node.

The session (backend.runtimes.placement_session) runs in a child process started by
backend/launch/children.py, with verbose logging; ORT's C++ logger writes the "Node placements"
block, which the child returns and the parent parses. A crash or a provider that fails to load in
the child cannot take the dashboard down. Graph optimizations are disabled so that the nodes ORT
places are the model's own nodes, not fused replacements.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from backend.compat.facts import read_nodes, unique_names
from backend.launch.children import run_in_child
from backend.launch.folders import owned_folder
from backend.models.inspect import external_data_files
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


def link_external_data(locations: list[str], source: Path, target: Path) -> None:
    """Hard links (copies across file systems) in `target` to the external-data files the graph
    names (`locations`) in `source`, so a renamed copy of the graph opens with its weights
    without Python reading them (a model past protobuf's 2 GB, or a GenAI folder's hard-linked
    files, which onnx's loader refuses). ONNX Runtime reads external data only inside the
    graph's own folder, which rules out symbolic links. A location that leaves `source` is not
    linked: the session then says the file is missing."""
    folder = source.resolve()
    for location in locations:
        real, link = (folder / location).resolve(), target / location
        if not (real.is_relative_to(folder) and real.is_file()) or link.exists():
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(real, link)
        except OSError:
            shutil.copyfile(real, link)


def read_placement(model_path: Path, provider: str, timeout: float = 300.0) -> Placement:
    """Create a session for `provider` (with CPU fallback) in a child and read its placement."""
    native = onnxruntime_provider_name(provider)
    model = onnx.load(str(model_path), load_external_data=False)
    names = [f.name for f in read_nodes(model)]
    source, locations = Path(model_path).parent, external_data_files(model)
    # beside the weights where we may write, so the links are hard links and nothing is copied;
    # else an owned folder, swept if this process is killed: the graph holds its inline weights
    near = source if locations and os.access(source, os.W_OK) else None
    folder = (
        tempfile.TemporaryDirectory(prefix=".optiboard-placement-", dir=near)
        if near is not None
        else owned_folder("placement")
    )
    with folder as tmp:
        named = Path(tmp) / "named.onnx"
        onnx.save(unique_names(model), str(named))  # the graph; its weights stay where they are
        link_external_data(locations, source, Path(tmp))
        outcome = run_in_child(placement_session, str(named), native, timeout_s=timeout)
    if not outcome.ok:  # a crash, a time-out, or a traceback whose last line says what it was
        last = (outcome.error or "").strip().splitlines()[-1:] or ["no reason given"]
        return Placement(native, error=f"the placement child failed: {last[0]}")
    report = outcome.value
    if report["error"]:
        return Placement(native, error=report["error"])
    return placement_from_log(native, report["providers"], report["log"], names)


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
    inserted = placement.get("inserted", 0)
    return line + (f" (+{inserted} copies ONNX Runtime put between devices)" if inserted else "")
