"""ONNX Runtime's TensorRT execution provider: TensorRT's parser rules, but a node TensorRT
rejects is handed to the CUDA or CPU provider instead of failing the session."""

from __future__ import annotations

from backend.compat import datafiles
from backend.compat.cells import CompatCell
from backend.compat.columns.base import CompatColumn, ModelContext
from backend.compat.columns.tensorrt import tensorrt_cell
from backend.compat.facts import NodeFacts


class OrtTensorRTColumn(CompatColumn):
    name = "ort-tensorrt"
    label = "ONNX Runtime TensorRT EP"
    placement_provider = "tensorrt"
    falls_back = True

    def cell(self, node: NodeFacts, context: ModelContext) -> CompatCell:
        support = datafiles.load("tensorrt")
        return tensorrt_cell(node, support, True, context.proto(node), context.types)
