"""One compatibility column: a backend that says, per node, whether it runs it and why.

A new column is one module in this package with a CompatColumn subclass, added by name to
COLUMNS in columns/__init__.py; build_matrix needs no change.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import onnx

from backend.compat import datafiles
from backend.compat.cells import CompatCell
from backend.compat.facts import NodeFacts
from backend.compat.placement import Placement
from backend.compat.registry import KernelRegistry

T = TypeVar("T")


@dataclass(frozen=True)
class Availability:
    """Whether a column applies to this model here; when it does not, the reason says why."""

    available: bool
    reason: str = ""


AVAILABLE = Availability(True)


@dataclass
class ModelContext:
    """What the columns know of one model: its format, node protos and value types, and the
    installed runtime's kernel registry. Cells are remembered, so a column may ask another's."""

    model_format: str
    registry: KernelRegistry
    protos: list[onnx.NodeProto] = field(default_factory=list)  # by NodeFacts.index
    types: dict[str, onnx.TypeProto] = field(default_factory=dict)
    _memo: dict[Hashable, Any] = field(default_factory=dict, repr=False)

    def proto(self, node: NodeFacts) -> onnx.NodeProto | None:
        return self.protos[node.index] if node.index < len(self.protos) else None

    def remember(self, key: Hashable, compute: Callable[[], T]) -> T:
        """compute() once per key and model (predictors, lists, cells)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def cell(self, column: CompatColumn, node: NodeFacts) -> CompatCell:
        """column's cell for node, computed once per model."""
        return self.remember(("cell", column.name, node.index), lambda: column.cell(node, self))


class CompatColumn(ABC):
    """A backend column of the matrix. Subclasses set name and label and implement cell()."""

    name: str = ""
    label: str = ""
    placement_provider: str | None = None  # ORT short provider name when a real session helps
    falls_back: bool = False  # unsupported nodes run on another provider instead of failing

    def availability(self, context: ModelContext) -> Availability:
        """Whether the column applies to this model; the default is that it always does."""
        return AVAILABLE

    @abstractmethod
    def cell(self, node: NodeFacts, context: ModelContext) -> CompatCell:
        """The status of one node on this backend, with a one-line reason and its source."""

    def source(self, context: ModelContext) -> dict[str, str] | None:
        """Where the column's answers come from, for the page's Data sources table."""
        return None

    def refine(
        self,
        nodes: list[NodeFacts],
        cells: list[CompatCell],
        placement: Placement,
        context: ModelContext,
    ) -> list[CompatCell]:
        """Correct the predicted cells with the real placement; by default they stand."""
        return cells


def list_source(column: str, support: datafiles.SupportList) -> dict[str, str]:
    """A data-sources row for a transcribed support list."""
    return {
        "backend": column,
        "title": support.title,
        "release": support.release,
        "source": support.source,
        "retrieved": support.retrieved,
    }
