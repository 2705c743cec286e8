"""ONNX Runtime's CPU provider, predicted from the installed runtime's own kernel registry."""

from __future__ import annotations

import onnx

from backend.compat.cells import SUPPORTED, UNKNOWN, CompatCell
from backend.compat.columns.base import CompatColumn, ModelContext
from backend.compat.facts import NodeFacts
from backend.compat.kernels import OrtPredictor
from backend.compat.placement import Placement
from backend.compat.registry import KernelRegistry


def cpu_predictor(registry: KernelRegistry) -> OrtPredictor:
    return OrtPredictor(
        "CPUExecutionProvider",
        "CPU",
        lambda d, op: registry.lookup("CPUExecutionProvider", d, op),
        f"registry: {registry.runtime}",
    )


def predict_cpu(
    node: NodeFacts,
    registry: KernelRegistry,
    proto: onnx.NodeProto | None = None,
    types: dict[str, onnx.TypeProto] | None = None,
) -> CompatCell:
    """The CPU column alone, for one node (used by the ground-truth run)."""
    return cpu_predictor(registry).predict(node, proto, types)


def cells_from_placement(
    nodes: list[NodeFacts], predicted: list[CompatCell], placement: Placement, why: str
) -> list[CompatCell]:
    """Without a readable registry, a real CPU session is the next-best source for the column.

    Seen on an H200 host whose onnxruntime-gpu lacked TensorRT: the registry dump segfaults while
    loading the TensorRT provider, yet sessions open fine.
    """
    cells = []
    for node, cell in zip(nodes, predicted, strict=True):
        if cell.status == UNKNOWN and placement.nodes.get(node.name) == placement.requested:
            cell = CompatCell(
                SUPPORTED,
                f"a real CPU session ran it (kernel registry unreadable: {why.splitlines()[0]})",
                "placement",
            )
        cells.append(cell)
    return cells


class OrtCpuColumn(CompatColumn):
    name = "ort-cpu"
    label = "ONNX Runtime CPU"
    placement_provider = "cpu"

    def cell(self, node: NodeFacts, context: ModelContext) -> CompatCell:
        registry = context.registry
        if registry.error:
            return CompatCell(UNKNOWN, f"kernel registry unreadable: {registry.error}", "registry")
        predictor = context.remember(("predictor", self.name), lambda: cpu_predictor(registry))
        return predictor.predict(node, context.proto(node), context.types)

    def source(self, context: ModelContext) -> dict[str, str]:
        return {
            "backend": self.name,
            "title": "installed kernel registry",
            "release": context.registry.runtime,
            "source": "onnxruntime get_all_opkernel_def()",
            "retrieved": "at build time",
        }

    def refine(
        self,
        nodes: list[NodeFacts],
        cells: list[CompatCell],
        placement: Placement,
        context: ModelContext,
    ) -> list[CompatCell]:
        if context.registry.error and placement.ok:
            return cells_from_placement(nodes, cells, placement, context.registry.error)
        return cells
