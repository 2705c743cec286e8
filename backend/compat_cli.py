"""`optiboard compat MODEL`: the Compatibility page's matrix in a terminal, as a table, CSV or JSON.

The same matrix (matrix_for_model, cached per model and runtime versions) and the same exports as
the page's downloads (backend.compat.export), so the terminal and the page never disagree.
Beside the compat package rather than in it: its __init__ imports ONNX, and every CLI call runs
register_compat, so the matrix's modules are imported by the functions that use them.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from backend.cli_parsing import output_path, write_output

if TYPE_CHECKING:
    from backend.compat.cells import CompatMatrix

FORMATS = ("table", "csv", "json")


def register_compat(sub: Any) -> None:
    """Add `compat` to the main parser (backend/cli.py)."""
    p = sub.add_parser("compat", help="which backend runs each node of a model, and why not")
    p.add_argument("model", type=int, help="model id (see `optiboard models`)")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--refresh", action="store_true", help="rebuild instead of using the cache")
    p.add_argument("-o", "--output", help="write to this file instead of the terminal")
    p.set_defaults(func=cmd_compat)


def summary_lines(matrix: CompatMatrix) -> list[str]:
    """Per backend: the share of nodes it runs and what does not, then the known fixes."""
    from backend.compat import export
    from backend.compat.placement import described
    from backend.reporting.text import table

    rows = []
    for s in export.summary(matrix):
        if not s.applicable:
            rows.append([s.label, "n/a", "-", "-", "-", "-", s.note])
            continue
        real = described(s.placement or {})
        rows.append(
            [
                s.label,
                f"{s.share:.0%} of {s.nodes}",
                s.unsupported,
                s.partial,
                s.unknown,
                s.fallbacks,
                f"real placement: {real}" if real else s.note,
            ]
        )
    headers = ["backend", "runs", "unsupported", "partial", "unknown", "fall back", "detail"]
    lines = [table(rows, headers)]
    fixes = [f"  {s.label}: {text}" for s in export.summary(matrix) for text in s.suggestions]
    if fixes:
        lines += ["", "suggested fixes:", *fixes]
    return lines


def node_lines(matrix: CompatMatrix) -> list[str]:
    """Every node a backend does not fully run, with the reason (supported nodes are left out)."""
    from backend.compat import export
    from backend.compat.cells import SUPPORTED
    from backend.reporting.text import table

    rows = [
        [r["backend_label"], r["node"], r["op_type"], r["status"], r["reason"]]
        for r in export.rows(matrix)
        if r["status"] != SUPPORTED
    ]
    if not rows:
        return ["every backend runs every node"]
    return [table(rows, ["backend", "node", "op", "status", "reason"])]


def cmd_compat(args: argparse.Namespace) -> int:
    from backend.compat import export
    from backend.compat.build import matrix_for_model

    target = output_path(args.output) if args.output else None  # before the matrix is built
    matrix = matrix_for_model(args.model, refresh=args.refresh)
    if args.format == "csv":
        text = export.to_csv(matrix)
    elif args.format == "json":
        text = export.to_json(matrix) + "\n"
    else:
        text = "\n".join([*summary_lines(matrix), "", *node_lines(matrix)]) + "\n"
    if target:
        write_output(target, text.encode())
        print(f"wrote the compatibility of model {args.model} ({args.format}) to {args.output}")
    else:
        sys.stdout.write(text)
    return 0
