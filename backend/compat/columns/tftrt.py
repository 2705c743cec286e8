"""TF-TRT: TensorRT inside TensorFlow. It converts TensorFlow ops, so it applies to SavedModel
uploads only, and the ONNX nodes of the converted model cannot say what it will convert."""

from __future__ import annotations

from backend.compat.cells import UNKNOWN, CompatCell
from backend.compat.columns.base import AVAILABLE, Availability, CompatColumn, ModelContext
from backend.compat.facts import NodeFacts


class TfTrtColumn(CompatColumn):
    name = "tf-trt"
    label = "TF-TRT"

    def availability(self, context: ModelContext) -> Availability:
        if context.model_format != "savedmodel":
            return Availability(False, "not applicable: TF-TRT applies to SavedModel uploads only")
        return AVAILABLE

    def cell(self, node: NodeFacts, context: ModelContext) -> CompatCell:
        return CompatCell(
            UNKNOWN,
            "TF-TRT converts TensorFlow ops, not ONNX nodes; "
            "segments it cannot convert stay in TensorFlow",
            "not assessed",
        )
