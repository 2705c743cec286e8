"""OpenVINO, predicted from the transcribed list of its ONNX frontend's op translators."""

from __future__ import annotations

from backend.compat import datafiles
from backend.compat.cells import PARTIAL, SUPPORTED, UNKNOWN, UNSUPPORTED, CompatCell
from backend.compat.columns.base import CompatColumn, ModelContext, list_source
from backend.compat.facts import NodeFacts


def openvino_cell(node: NodeFacts, support: datafiles.SupportList) -> CompatCell:
    source = f"list: {support.label}"
    entry = support.entry(node.domain, node.op_type)
    if entry is None:
        if support.covers_domain(node.domain) and support.complete:
            return CompatCell(
                UNSUPPORTED, f"{node.op_type} is not in OpenVINO's ONNX frontend list", source
            )
        return CompatCell(UNKNOWN, f"{node.domain_label} ops are not in OpenVINO's list", source)
    versions = entry["versions"]
    if not versions:
        return CompatCell(
            UNSUPPORTED, f"OpenVINO's ONNX frontend has no translator for {node.op_type}", source
        )
    version = node.op_version
    if version is not None and min(versions) > version:
        return CompatCell(
            UNSUPPORTED,
            f"OpenVINO translates {node.op_type} from version {min(versions)}; "
            f"this node is version {version}",
            source,
            f"change opset: convert the model to opset {min(versions)} or later",
        )
    if entry.get("limitation"):
        return CompatCell(PARTIAL, entry["limitation"], source)
    usable = max((v for v in versions if version is None or v <= version), default=min(versions))
    return CompatCell(
        SUPPORTED, f"OpenVINO translator for {node.op_type} (version {usable})", source
    )


class OpenVINOColumn(CompatColumn):
    name = "openvino"
    label = "OpenVINO"

    def cell(self, node: NodeFacts, context: ModelContext) -> CompatCell:
        return openvino_cell(node, datafiles.load("openvino"))

    def source(self, context: ModelContext) -> dict[str, str]:
        return list_source(self.name, datafiles.load("openvino"))
