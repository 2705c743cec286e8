"""ONNX Runtime's CUDA provider: the installed registry when it has CUDA kernels, else the
transcribed CUDA kernel list. Nodes it cannot take fall back to the CPU provider."""

from __future__ import annotations

from backend.compat import datafiles
from backend.compat.cells import SUPPORTED, UNKNOWN, UNSUPPORTED, CompatCell
from backend.compat.columns.base import CompatColumn, ModelContext, list_source
from backend.compat.columns.ort_cpu import OrtCpuColumn
from backend.compat.facts import NodeFacts
from backend.compat.kernels import OrtPredictor, kernels_from_list
from backend.compat.registry import KernelRegistry

PROVIDER = "CUDAExecutionProvider"
_CPU = OrtCpuColumn()


def cuda_predictor(registry: KernelRegistry) -> tuple[OrtPredictor, datafiles.SupportList | None]:
    """The predictor, and the transcribed list it reads when the registry has no CUDA kernels."""
    if PROVIDER in registry.providers:
        lookup = lambda d, op: registry.lookup(PROVIDER, d, op)  # noqa: E731
        return OrtPredictor(PROVIDER, "CUDA", lookup, f"registry: {registry.runtime}"), None
    support = datafiles.load("ort-cuda")
    return (
        OrtPredictor(
            PROVIDER,
            "CUDA",
            lambda d, op: kernels_from_list(support, op, PROVIDER) if d == "" else [],
            f"list: {support.label}",
        ),
        support,
    )


class OrtCudaColumn(CompatColumn):
    name = "ort-cuda"
    label = "ONNX Runtime CUDA"
    placement_provider = "cuda"
    falls_back = True

    def _predictor(
        self, context: ModelContext
    ) -> tuple[OrtPredictor, datafiles.SupportList | None]:
        return context.remember(("predictor", self.name), lambda: cuda_predictor(context.registry))

    def cell(self, node: NodeFacts, context: ModelContext) -> CompatCell:
        predictor, support = self._predictor(context)
        if support is not None and node.domain != "" and not support.covers_domain(node.domain):
            return CompatCell(
                UNKNOWN,
                f"{node.domain_label} ops are not in the transcribed CUDA kernel list",
                f"list: {support.label}",
            )
        cell = predictor.predict(node, context.proto(node), context.types)
        if cell.status == UNSUPPORTED and context.cell(_CPU, node).status == SUPPORTED:
            return CompatCell(
                UNSUPPORTED, f"{cell.reason}; runs on CPU: falls back", cell.source, cell.fix
            )
        return cell

    def source(self, context: ModelContext) -> dict[str, str] | None:
        _, support = self._predictor(context)
        return list_source(self.name, support) if support is not None else None
