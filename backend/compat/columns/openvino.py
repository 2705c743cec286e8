"""OpenVINO, answered by OpenVINO itself where it is installed: read_model, query_model per op
and a real compile_model on the CPU. Where it is not installed, the transcribed list of its ONNX
frontend's translators (data/openvino.json) predicts instead, and the cells say so.
"""

from __future__ import annotations

import dataclasses
import re

from backend.compat import datafiles
from backend.compat.cells import PARTIAL, SUPPORTED, UNKNOWN, UNSUPPORTED, CompatCell
from backend.compat.columns.base import CompatColumn, ModelContext, list_source
from backend.compat.facts import NodeFacts
from backend.models.nodenames import MAIN
from backend.runtimes import get_runtime
from backend.runtimes.base import ModelQuery


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


def named_in(op_type: str, domain: str, failed_ops: dict[str, str]) -> str | None:
    """The entry of OpenVINO's failure report that names this op, e.g. 'Bernoulli-15'."""
    wanted = {op_type, f"{domain}.{op_type}"}
    return next((e for e in failed_ops if re.sub(r"-\d+$", "", e) in wanted), None)


def failure_cell(
    node: NodeFacts, query: ModelQuery, attributed: bool, listed: CompatCell
) -> CompatCell:
    """A node of a model OpenVINO could not read or compile: the named op is unsupported; the
    others keep the list's answer when some op was named, else the model's failure is theirs."""
    source = f"{query.stage}: {query.runtime} {query.device}"
    step = "read_model (its ONNX frontend)" if query.stage == "read" else "compile_model"
    entry = named_in(node.op_type, node.domain, query.failed_ops)
    if entry is not None:
        detail = query.failed_ops[entry]
        reason = f"OpenVINO {step} fails on {entry}" + (f": {detail}" if detail else "")
        return CompatCell(UNSUPPORTED, reason[:400], source)
    if attributed:
        reason = f"{listed.reason}; OpenVINO cannot read this model because of another op"
        return dataclasses.replace(listed, reason=reason[:400])
    reason = f"OpenVINO {step} fails on this model and names no op: {query.error}"
    return CompatCell(UNSUPPORTED, reason[:400], source)


def query_cell(node: NodeFacts, outputs: list[str], query: ModelQuery) -> CompatCell:
    """One node of a model OpenVINO compiled, from query_model's answer for its outputs."""
    source = f"query_model: {query.runtime} {query.device}"
    known = [query.tensors[name] for name in outputs if name in query.tensors]
    missing = sorted({op for ops in known for op in ops})
    if missing:
        return CompatCell(
            UNSUPPORTED,
            f"OpenVINO's {query.device} plugin does not take {', '.join(missing)} (query_model)",
            source,
        )
    if not known:
        return CompatCell(
            SUPPORTED, "OpenVINO translated it and folded it into its neighbours", source
        )
    return CompatCell(SUPPORTED, f"OpenVINO {query.device} takes it (query_model)", source)


class OpenVINOColumn(CompatColumn):
    name = "openvino"
    label = "OpenVINO"

    def _query(self, context: ModelContext) -> ModelQuery | None:
        """OpenVINO's answer for the whole model, once; None where OpenVINO is not installed."""
        if context.model_path is None:
            return None
        path = context.model_path
        return context.remember(
            ("query", self.name), lambda: get_runtime("openvino").query_model(path, "cpu")
        )

    def _attributed(self, query: ModelQuery, context: ModelContext) -> bool:
        """Whether OpenVINO's failure report names an op of this model."""
        return any(named_in(p.op_type, p.domain, query.failed_ops) for p in context.protos)

    def cell(self, node: NodeFacts, context: ModelContext) -> CompatCell:
        listed = openvino_cell(node, datafiles.load("openvino"))
        query = self._query(context)
        if query is None:
            return listed
        if query.stage and (query.stage == "read" or not any(query.tensors.values())):
            attributed = context.remember(
                ("attributed", self.name), lambda: self._attributed(query, context)
            )
            return failure_cell(node, query, attributed, listed)
        proto = context.proto(node)
        if proto is None or node.graph != MAIN:  # subgraph ops have no tensors of their own
            return listed
        return query_cell(node, [name for name in proto.output if name], query)

    def source(self, context: ModelContext) -> dict[str, str]:
        query = self._query(context)
        if query is None:
            return list_source(self.name, datafiles.load("openvino"))
        return {
            "backend": self.name,
            "title": "OpenVINO read_model, query_model and compile_model on this machine",
            "release": query.runtime,
            "source": f"the installed openvino package, device {query.device}",
            "retrieved": "when the matrix was built",
        }
