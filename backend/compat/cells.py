"""The matrix's data: one CompatCell per node and backend column, with the real placements.

Presentation (summary, frames, CSV and JSON) lives in backend/compat/export.py, because it
needs each column's label from the column registry, which itself builds these cells.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from backend.compat.facts import NodeFacts
from backend.compat.placement import Placement

MATRIX_VERSION = "compat-2"  # 2: graph spelled as the Graph page, TensorRT conditions checked


class CellStatus(StrEnum):
    """How well a backend runs a node; the values are stored in caches and exports."""

    SUPPORTED = "supported"
    PARTIAL = "partial"
    UNSUPPORTED = "unsupported"
    UNKNOWN = "unknown"

    @property
    def runs(self) -> bool:
        """Supported or partial: the backend runs the node, maybe with a caveat."""
        return self in (CellStatus.SUPPORTED, CellStatus.PARTIAL)


SUPPORTED, PARTIAL, UNSUPPORTED, UNKNOWN = (
    CellStatus.SUPPORTED,
    CellStatus.PARTIAL,
    CellStatus.UNSUPPORTED,
    CellStatus.UNKNOWN,
)
STATUSES = tuple(CellStatus)


@dataclass(frozen=True)
class CompatCell:
    """One node on one backend: status, a one-line reason, where the answer came from."""

    status: CellStatus
    reason: str
    source: str
    fix: str | None = None  # a concrete suggestion where a known fix exists

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompatCell:
        return cls(CellStatus(data["status"]), data["reason"], data["source"], data.get("fix"))


@dataclass
class CompatMatrix:
    """Every node against every applicable column; notes say why a column does not apply."""

    model_format: str
    nodes: list[NodeFacts]
    backends: list[str]
    cells: dict[str, list[CompatCell]]  # backend -> one cell per node, in node order
    placements: dict[str, Placement] = field(default_factory=dict)
    runtime: str = ""
    sources: list[dict[str, str]] = field(default_factory=list)
    fingerprint: str = ""
    notes: dict[str, str] = field(default_factory=dict)  # backend -> why it is not applicable

    def cell(self, backend: str, index: int) -> CompatCell:
        return self.cells[backend][index]

    def placed_on(self, backend: str, node: NodeFacts) -> str | None:
        placement = self.placements.get(backend)
        if placement is None or not placement.ok:
            return None
        return placement.nodes.get(node.name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": MATRIX_VERSION,
            "model_format": self.model_format,
            "runtime": self.runtime,
            "fingerprint": self.fingerprint,
            "sources": self.sources,
            "notes": self.notes,
            "backends": self.backends,
            "nodes": [asdict(n) for n in self.nodes],
            "cells": {b: [asdict(c) for c in cs] for b, cs in self.cells.items()},
            "placements": {b: p.to_dict() for b, p in self.placements.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompatMatrix:
        nodes = []
        for n in data["nodes"]:
            n = dict(n)
            for key in ("input_types", "output_types", "input_is_initializer", "attributes"):
                n[key] = tuple(n[key])
            nodes.append(NodeFacts(**n))
        return cls(
            model_format=data["model_format"],
            nodes=nodes,
            backends=data["backends"],
            cells={b: [CompatCell.from_dict(c) for c in cs] for b, cs in data["cells"].items()},
            placements={b: Placement.from_dict(p) for b, p in data["placements"].items()},
            runtime=data["runtime"],
            sources=data["sources"],
            fingerprint=data["fingerprint"],
            notes=data.get("notes", {}),
        )
