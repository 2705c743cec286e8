"""Operator compatibility: which backend can run each node of a model, and why (issue 4)."""

from backend.compat.facts import NodeFacts
from backend.compat.matrix import (
    BACKEND_LABELS,
    STATUSES,
    BackendSummary,
    CompatCell,
    CompatMatrix,
    build_matrix,
    matrix_for_model,
)
from backend.compat.placement import Placement

__all__ = [
    "BACKEND_LABELS",
    "STATUSES",
    "BackendSummary",
    "CompatCell",
    "CompatMatrix",
    "NodeFacts",
    "Placement",
    "build_matrix",
    "matrix_for_model",
]
