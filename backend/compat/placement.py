"""Real node placement: which execution provider ONNX Runtime actually gave each node.

The session runs in a child process with verbose logging; ORT's C++ logger writes the
"Node placements" block to stderr, which the parent parses. A crash or a provider that fails to
load in the child cannot take the dashboard down. Graph optimizations are disabled so that the
nodes ORT places are the model's own nodes, not fused replacements.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.compat.registry import ROOT
from backend.runtimes.onnxruntime import NATIVE_PROVIDERS

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
    counts: dict[str, int] = field(default_factory=dict)  # provider -> node count (from the log)
    error: str | None = None  # the session could not be created: the runtime's own message
    method: str = "log"

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


def read_placement(model_path: Path, provider: str, timeout: float = 300.0) -> Placement:
    """Create a session for `provider` (with CPU fallback) in a child and read its placement."""
    native = NATIVE_PROVIDERS.get(provider, provider)
    import onnx

    from backend.compat.facts import read_nodes, unique_names

    model = onnx.load(str(model_path), load_external_data=False)
    names = [f.name for f in read_nodes(model)]
    with tempfile.TemporaryDirectory(prefix="optiboard-placement-") as tmp:
        named = Path(tmp) / "named.onnx"
        full = onnx.load(str(model_path))  # with external data, so the session can load it
        onnx.save(unique_names(full), str(named))
        proc = subprocess.run(
            [sys.executable, "-m", "backend.compat.placement", str(named), native],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    try:
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        return Placement(native, error=f"the placement child crashed ({how})")
    if report.get("error"):
        return Placement(native, error=report["error"])
    nodes, counts, everything_on = parse_placement_log(proc.stderr)
    if everything_on is not None:
        nodes = {name: everything_on for name in names}
    return Placement(
        requested=native,
        session_providers=report["providers"],
        nodes={n: p for n, p in nodes.items() if n in set(names)},
        counts=counts,
    )


def _child(model_path: str, provider: str) -> dict[str, Any]:
    """In the child: open the session verbosely; ORT logs the placement to stderr."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 0
    options.log_verbosity_level = 0
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    providers = (
        [provider] if provider == "CPUExecutionProvider" else [provider, "CPUExecutionProvider"]
    )
    try:
        session = ort.InferenceSession(model_path, options, providers=providers)
    except Exception as exc:  # the runtime's message is the result here
        return {"error": str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)}
    return {"providers": session.get_providers(), "error": None}


if __name__ == "__main__":
    result = _child(sys.argv[1], sys.argv[2])
    sys.stderr.flush()
    print(json.dumps(result), flush=True)
