"""Operator compatibility: which backend can run each node of a model, and why (issue 4).

Rooms: facts (what a node is), cells (CompatCell, CompatMatrix), kernels (ORT kernel matching),
columns/ (one module per backend, registered in COLUMNS), build (the matrix, its cache and child),
export (summary, frames, CSV, JSON), placement and groundtruth (real ORT sessions, via runtimes).
"""

from backend.compat.build import build_matrix, matrix_for_model
from backend.compat.cells import STATUSES, CellStatus, CompatCell, CompatMatrix
from backend.compat.columns import BACKEND_LABELS, COLUMNS, CompatColumn
from backend.compat.export import BackendSummary
from backend.compat.facts import NodeFacts
from backend.compat.placement import Placement

__all__ = [
    "BACKEND_LABELS",
    "COLUMNS",
    "STATUSES",
    "BackendSummary",
    "CellStatus",
    "CompatCell",
    "CompatColumn",
    "CompatMatrix",
    "NodeFacts",
    "Placement",
    "build_matrix",
    "matrix_for_model",
]
