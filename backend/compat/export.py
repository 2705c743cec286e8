"""The matrix as people read it: per-backend summary, node and op frames, CSV and JSON."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from backend.compat.cells import PARTIAL, SUPPORTED, UNKNOWN, UNSUPPORTED, CompatMatrix
from backend.compat.columns import COLUMNS
from backend.compat.facts import short_type
from backend.reporting.csvsafe import neutralise

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class BackendSummary:
    backend: str
    label: str
    applicable: bool
    nodes: int
    supported: int
    partial: int
    unsupported: int
    unknown: int
    fallbacks: int  # nodes another provider runs instead (predicted, or real where placed)
    share: float  # (supported + partial) / nodes
    suggestions: list[str]
    placement: dict[str, Any] | None = None  # real placement: counts or the session's error
    note: str = ""


def label(backend: str) -> str:
    column = COLUMNS.get(backend)
    return column.label if column is not None else backend


def rows(matrix: CompatMatrix) -> list[dict[str, Any]]:
    """One row per node x backend, for tables, filters and exports."""
    out = []
    for backend in matrix.backends:
        placement = matrix.placements.get(backend)
        for node in matrix.nodes:
            c = matrix.cells[backend][node.index]
            out.append(
                {
                    "node": node.name,
                    "index": node.index,
                    "op_type": node.op_type,
                    "domain": node.domain_label,
                    "op_version": node.op_version,
                    "opset": node.opset,
                    "input_types": ", ".join(short_type(t) for t in node.input_types),
                    "output_types": ", ".join(short_type(t) for t in node.output_types),
                    "graph": node.graph,
                    "backend": backend,
                    "backend_label": label(backend),
                    "status": c.status,
                    "reason": c.reason,
                    "source": c.source,
                    "fix": c.fix or "",
                    "placed_on": matrix.placed_on(backend, node) or "",
                    "placement_error": (placement.error or "") if placement else "",
                }
            )
    return out


def to_frame(matrix: CompatMatrix) -> pd.DataFrame:
    import pandas as pd  # here: the CLI's table and CSV paths need no pandas (0.3 s a start)

    return pd.DataFrame(rows(matrix))


def _not_applicable(matrix: CompatMatrix, backend: str) -> BackendSummary:
    n = len(matrix.nodes)
    note = matrix.notes[backend]
    return BackendSummary(backend, label(backend), False, n, 0, 0, 0, 0, 0, 0.0, [], None, note)


def summary(matrix: CompatMatrix) -> list[BackendSummary]:
    """Per backend: how many nodes it runs, what falls back, and the known fixes."""
    out = []
    for backend in (*matrix.backends, *[b for b in matrix.notes if b not in matrix.backends]):
        if backend not in matrix.backends:
            out.append(_not_applicable(matrix, backend))
            continue
        cells = matrix.cells[backend]
        counts = Counter(c.status for c in cells)
        fixes = Counter(c.fix for c in cells if c.fix)
        suggestions = [f"{fix} ({n} node{'s' if n != 1 else ''})" for fix, n in fixes.items()]
        placement = matrix.placements.get(backend)
        column = COLUMNS.get(backend)
        fallbacks = counts[UNSUPPORTED] if column is not None and column.falls_back else 0
        if placement is not None and placement.ok and placement.requested_active:
            fallbacks = len(placement.fallbacks())  # a provider that never started sends none
        n = len(cells)
        out.append(
            BackendSummary(
                backend=backend,
                label=label(backend),
                applicable=True,
                nodes=n,
                supported=counts[SUPPORTED],
                partial=counts[PARTIAL],
                unsupported=counts[UNSUPPORTED],
                unknown=counts[UNKNOWN],
                fallbacks=fallbacks,
                share=(counts[SUPPORTED] + counts[PARTIAL]) / n if n else 1.0,
                suggestions=suggestions,
                placement=placement.to_dict() if placement is not None else None,
                note=matrix.notes.get(backend, ""),
            )
        )
    return out


def op_frame(matrix: CompatMatrix) -> pd.DataFrame:
    """Ops x backends with node counts and the worst status, for the heat map."""
    frame = to_frame(matrix)
    if frame.empty:
        return frame
    rank = {SUPPORTED: 0, UNKNOWN: 1, PARTIAL: 2, UNSUPPORTED: 3}
    frame["rank"] = frame["status"].map(rank)
    frame["op"] = frame.apply(
        lambda r: r["op_type"] if r["domain"] == "ai.onnx" else f"{r['domain']}::{r['op_type']}",
        axis=1,
    )
    grouped = frame.groupby(["op", "backend"], sort=False).agg(
        nodes=("node", "count"),
        rank=("rank", "max"),
        unsupported=("status", lambda s: int((s == UNSUPPORTED).sum())),
    )
    grouped = grouped.reset_index()
    inverse = {v: k for k, v in rank.items()}
    grouped["status"] = grouped["rank"].map(inverse)
    return grouped.drop(columns=["rank"])


def to_json(matrix: CompatMatrix) -> str:
    """The matrix as one JSON document: nodes, cells per backend, placements, sources."""
    payload = matrix.to_dict()
    payload["summary"] = [asdict(s) for s in summary(matrix)]
    return json.dumps(payload, indent=1)


def csv_cell(value: Any) -> str:
    """The one place a CSV cell's text is made (empty for None); keep every cell going here."""
    return "" if value is None else str(neutralise(value))


def to_csv(matrix: CompatMatrix) -> str:
    """The node x backend rows as CSV, a header line first."""
    table = rows(matrix)
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    if table:
        writer.writerow([csv_cell(key) for key in table[0]])
        writer.writerows([csv_cell(v) for v in row.values()] for row in table)
    return buffer.getvalue()
