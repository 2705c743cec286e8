"""Ground truth for the CPU column: the ONNX project's backend node tests, run for real.

Each test case in the `onnx` package is a single-op model with inputs. The prediction says
whether ONNX Runtime's CPU provider can run it; the truth is whether a session loads it and runs
it on those inputs (backend.runtimes.run_on_cpu_once). Cases run in batches in child processes
started by backend/launch/children.py; a batch goes in as a JSON-lines file and the results come
back as one, line by line, so a crash costs one case, not the bench.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import tempfile
import warnings
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from backend.compat.columns.ort_cpu import predict_cpu
from backend.compat.facts import node_protos, read_nodes, value_types
from backend.compat.registry import KernelRegistry, load_registry
from backend.launch.children import run_module
from backend.runtimes import run_on_cpu_once


@dataclass(frozen=True)
class NodeCase:
    name: str
    op: str
    model: onnx.ModelProto
    inputs: list[Any]


@dataclass(frozen=True)
class CaseOutcome:
    name: str
    op: str
    predicted: bool
    actual: bool
    reason: str  # the prediction's reason for the first unsupported node, or ''
    error: str  # the runtime's error when it failed, or ''


@dataclass
class Confusion:
    outcomes: list[CaseOutcome] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        c = Counter()
        for o in self.outcomes:
            key = ("T" if o.predicted == o.actual else "F") + ("P" if o.predicted else "N")
            c[key] += 1
        return {k: c[k] for k in ("TP", "FP", "FN", "TN")}

    @property
    def agreement(self) -> float:
        if not self.outcomes:
            return 0.0
        return sum(o.predicted == o.actual for o in self.outcomes) / len(self.outcomes)

    def disagreements_by_op(self) -> dict[str, list[CaseOutcome]]:
        out: dict[str, list[CaseOutcome]] = defaultdict(list)
        for o in self.outcomes:
            if o.predicted != o.actual:
                out[o.op].append(o)
        return dict(sorted(out.items()))

    def disagreement_lines(self) -> list[str]:
        """The disagreements grouped by op, one line per case, as the benches print them."""
        grouped = self.disagreements_by_op()
        if not grouped:
            return []
        lines = [f"disagreements by op ({sum(len(v) for v in grouped.values())}):"]
        for op, outcomes in grouped.items():
            lines.append(f"  {op}: {len(outcomes)}")
            for o in outcomes:
                side = "predicted runs, failed" if o.predicted else "predicted fails, ran"
                detail = o.error if o.predicted else o.reason
                lines.append(f"    {o.name}: {side}: {detail[:160]}")
        return lines


def collect_cases() -> list[NodeCase]:
    """The node test cases shipped in the installed onnx package, generated in memory."""
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node.collect_testcases(None)
    out = []
    for case in cases:
        if case.model is None or not case.data_sets:
            continue
        op = case.model.graph.node[0].op_type if case.model.graph.node else "?"
        out.append(NodeCase(case.name, op, case.model, list(case.data_sets[0][0])))
    return out


def predict_case(model: onnx.ModelProto, registry: KernelRegistry) -> tuple[bool, str]:
    """True when every node (subgraphs included) is predicted to run on the CPU provider."""
    types = value_types(model)
    for node, proto in zip(read_nodes(model), node_protos(model), strict=True):
        cell = predict_cpu(node, registry, proto, types)
        if not cell.status.runs:
            return False, f"{node.op_type}: {cell.reason}"
    return True, ""


def encode_input(value: Any) -> Any:
    """A test input as JSON: tensors as base64 TensorProtos, sequences as lists, None as null."""
    if value is None:
        return None
    if isinstance(value, list):
        return {"sequence": [encode_input(v) for v in value]}
    tensor = (
        value if isinstance(value, onnx.TensorProto) else numpy_helper.from_array(np.asarray(value))
    )
    return {"tensor": base64.b64encode(tensor.SerializeToString()).decode("ascii")}


def decode_input(data: Any) -> Any:
    """The inverse of encode_input: numpy arrays (ml_dtypes ones included), lists, None."""
    if data is None:
        return None
    if "sequence" in data:
        return [decode_input(v) for v in data["sequence"]]
    return numpy_helper.to_array(onnx.TensorProto.FromString(base64.b64decode(data["tensor"])))


def write_batch(path: Path, batch: list[NodeCase]) -> None:
    """One JSON line per case: name, the model as base64, the encoded inputs."""
    with path.open("w") as handle:
        for case in batch:
            row = {
                "name": case.name,
                "model": base64.b64encode(case.model.SerializeToString()).decode("ascii"),
                "inputs": [encode_input(v) for v in case.inputs],
            }
            handle.write(json.dumps(row) + "\n")


def _worker(batch_file: str, results_file: str) -> None:
    """Child: run each case of the batch on ORT's CPU provider, appending one JSON line per
    finished case to results_file, so a crash loses only the case it happened in."""
    with open(batch_file) as cases, open(results_file, "a") as results:
        for line in cases:
            row = json.loads(line)
            inputs = [decode_input(v) for v in row["inputs"]]
            error = run_on_cpu_once(base64.b64decode(row["model"]), inputs)
            results.write(json.dumps({"name": row["name"], "error": error}) + "\n")
            results.flush()


def _read_results(path: Path) -> dict[str, dict[str, Any]]:
    """name -> the child's row ({'error': ...} and whatever else the child reports)."""
    results = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a crash
            continue
        results[row["name"]] = row
    return results


def run_batch(
    batch: list[NodeCase], timeout: float, module: str = "backend.compat.groundtruth"
) -> dict[str, dict[str, Any]]:
    """Run a batch in a child (`python -m module CASES RESULTS`); a crash marks the case it was
    on failed ({'error': the crash}) and the rest continue in a new child."""
    results: dict[str, dict[str, Any]] = {}
    pending = list(batch)
    with tempfile.TemporaryDirectory(prefix="optiboard-groundtruth-") as tmp:
        while pending:
            cases, done = Path(tmp) / "cases.jsonl", Path(tmp) / "results.jsonl"
            write_batch(cases, pending)
            done.unlink(missing_ok=True)
            crash = ""
            try:
                run_module(
                    module,
                    str(cases),
                    str(done),
                    timeout_s=timeout,
                    what="the ground-truth child",
                )
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                crash = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            finished = _read_results(done)
            results.update(finished)
            pending = [c for c in pending if c.name not in finished]
            if not crash:
                break
            if pending:
                results[pending.pop(0).name] = {"error": crash}
    return results


def run_cases(
    cases: list[NodeCase], registry: KernelRegistry | None = None, jobs: int = 2, batch: int = 60
) -> Confusion:
    """Predict and really run every case; returns the confusion of prediction against truth."""
    registry = registry or load_registry()
    batches = [cases[i : i + batch] for i in range(0, len(cases), batch)]
    errors: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(lambda b: run_batch(b, timeout=600), batches):
            errors.update({name: row["error"] for name, row in result.items()})
    confusion = Confusion()
    for case in cases:
        predicted, reason = predict_case(case.model, registry)
        error = errors.get(case.name, "not run")
        confusion.outcomes.append(
            CaseOutcome(case.name, case.op, predicted, error == "", reason, error)
        )
    return confusion


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
