"""The conditions the TensorRT support matrix puts on an op, checked against one node where the
model's own graph can tell: "`axes` must be an initializer" on a ReduceSum whose axes is one, or
an If whose branches' outputs differ in name and share a rank. A condition no check here covers
stays "not checked here", so a cell never claims more than the graph shows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import onnx

from backend.compat.facts import NodeFacts

# (met: True, not met: False, cannot tell: None; the fact behind it, for the reason)
Verdict = tuple[bool | None, str]
Check = Callable[[NodeFacts, onnx.NodeProto, dict[str, onnx.TypeProto]], Verdict]


def _constant_input(index: int, name: str, optional: bool) -> Check:
    """An input the importer needs as a constant: met when it is an initializer, or absent where
    the op allows that (a Reduce without axes, an old opset's axes attribute)."""

    def check(node: NodeFacts, proto: onnx.NodeProto, _: dict[str, onnx.TypeProto]) -> Verdict:
        given = index < len(proto.input) and proto.input[index]
        if not given:
            return (
                (True, f"`{name}` is not an input") if optional else (None, f"`{name}` not given")
            )
        if index < len(node.input_is_initializer) and node.input_is_initializer[index]:
            return True, f"`{name}` is the initializer {proto.input[index]!r}"
        return None, f"`{name}` is {proto.input[index]!r}, not an initializer"

    return check


def _rank(name: str, graph: onnx.GraphProto, types: dict[str, onnx.TypeProto]) -> int | None:
    """A branch output's rank, from shape inference or the branch's own declaration."""
    declared = {o.name: o.type for o in graph.output}
    for proto in (types.get(name), declared.get(name)):
        if proto is not None and proto.tensor_type.HasField("shape"):
            return len(proto.tensor_type.shape.dim)
    return None


def _if_branches(_: NodeFacts, proto: onnx.NodeProto, types: dict[str, onnx.TypeProto]) -> Verdict:
    """Each output pair of then_branch and else_branch: same rank, different names."""
    branch = {a.name: a.g for a in proto.attribute if a.HasField("g")}
    then, other = branch.get("then_branch"), branch.get("else_branch")
    if then is None or other is None:
        return None, "branches not readable"
    facts, unknown = [], False
    for a, b in zip(then.output, other.output, strict=False):
        if a.name == b.name:
            return False, f"both branches name their output {a.name!r}"
        ranks = _rank(a.name, then, types), _rank(b.name, other, types)
        if None in ranks:
            unknown = True
            facts.append(f"{a.name} / {b.name}: rank not known")
        elif ranks[0] != ranks[1]:
            return False, f"{a.name} has rank {ranks[0]}, {b.name} rank {ranks[1]}"
        else:
            facts.append(f"{a.name} / {b.name}: rank {ranks[0]} each")
    return (None if unknown else True), "; ".join(facts)


AXES = _constant_input(1, "axes", optional=True)

# the support matrix's sentence (as data/tensorrt.json writes it, without its full stop) -> check
CHECKS: dict[str, Check] = {
    "`axes` must be an initializer": AXES,
    "`axes` must be resolvable to a constant": AXES,
    "`axis` must be a build-time constant": _constant_input(1, "axis", optional=False),
    "`depth` must be a build-time constant": _constant_input(1, "depth", optional=False),
    "Output tensors of the two conditional branches must have the same rank and must have "
    "different names": _if_branches,
}


def sentences(restrictions: str) -> list[str]:
    """The support matrix's restrictions, one condition a sentence, without full stops."""
    return [s.strip().rstrip(".") for s in restrictions.split(". ") if s.strip()]


@dataclass
class Judged:
    """One node's conditions, sorted by what its graph shows."""

    met: list[str] = field(default_factory=list)  # "condition (the fact that meets it)"
    unmet: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # a check ran and could not tell
    unchecked: list[str] = field(default_factory=list)  # no check for this condition here

    @property
    def checked(self) -> bool:
        """Whether any condition had a check (none: the cell keeps the list's own words)."""
        return bool(self.met or self.unmet or self.unknown)


def judge(
    node: NodeFacts,
    proto: onnx.NodeProto | None,
    types: dict[str, onnx.TypeProto],
    restrictions: str,
) -> Judged:
    """Each condition of `restrictions` as met, not met, unknown or unchecked for this node."""
    judged = Judged()
    for sentence in sentences(restrictions):
        check = CHECKS.get(sentence)
        clause = sentence[:1].lower() + sentence[1:]  # read inside the cell's sentence
        if check is None or proto is None:
            judged.unchecked.append(clause)
            continue
        verdict, fact = check(node, proto, types)
        line = f"{clause} ({fact})"
        {True: judged.met, False: judged.unmet, None: judged.unknown}[verdict].append(line)
    return judged
