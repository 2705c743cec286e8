"""Ground truth for the CPU column: the ONNX project's backend node tests, run for real.

Each test case in the `onnx` package is a single-op model with inputs. The prediction says
whether ONNX Runtime's CPU provider can run it; the truth is whether a session loads it and runs
it on those inputs. Cases run in child processes in batches, so a crash costs one case, not the
bench.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import tempfile
import warnings
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from backend.compat.facts import node_protos, read_nodes, value_types
from backend.compat.matrix import PARTIAL, SUPPORTED, predict_cpu
from backend.compat.registry import ROOT, KernelRegistry, load_registry


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
        if cell.status not in (SUPPORTED, PARTIAL):
            return False, f"{node.op_type}: {cell.reason}"
    return True, ""


def _feed(value: Any) -> Any:
    """Test inputs as ORT takes them: TensorProtos and numpy scalars become arrays, and dtypes
    numpy has no native code for (bfloat16, float8, int4 from ml_dtypes) become OrtValues."""
    import numpy as np
    import onnxruntime as ort
    from onnx import numpy_helper

    if isinstance(value, onnx.TensorProto):
        value = numpy_helper.to_array(value)
    if isinstance(value, list):
        return [_feed(v) for v in value]
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if (
        isinstance(value, np.ndarray)
        and value.dtype.kind == "V"
        or (isinstance(value, np.ndarray) and value.dtype.name in _ML_DTYPES)
    ):
        onnx_type = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(value, onnx_type)
    return value


_ML_DTYPES = {
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "int4",
    "uint4",
    "float4_e2m1fn",
    "int2",
    "uint2",
}


def _run_one(model_bytes: bytes, inputs: list[Any]) -> str:
    """'' when ORT loads and runs the model on the inputs, else the first line of the error."""
    import onnxruntime as ort

    try:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        feeds = {n: _feed(v) for n, v in zip(names, inputs, strict=False) if v is not None}
        plain = not any(isinstance(v, ort.OrtValue) for v in feeds.values())
        if plain and any(
            isinstance(v, list) or getattr(v, "dtype", None) is not None and v.dtype.kind in "OUS"
            for v in feeds.values()
        ):
            session.run(None, feeds)  # sequences and strings: only run() takes these
        else:
            # OrtValues in and out: outputs such as bfloat16 have no numpy type to convert to
            values = {
                n: v if isinstance(v, ort.OrtValue) else ort.OrtValue.ortvalue_from_numpy(v)
                for n, v in feeds.items()
            }
            session.run_with_ort_values(None, values)
    except Exception as exc:  # the failure is the measurement
        text = str(exc).strip()
        return (text.splitlines()[0] if text else type(exc).__name__)[:300]
    return ""


def _worker(batch_file: str) -> None:
    """Child: run each case of a pickled batch, printing one JSON line per finished case."""
    with open(batch_file, "rb") as handle:
        batch = pickle.load(handle)
    for name, model_bytes, inputs in batch:
        error = _run_one(model_bytes, inputs)
        print(json.dumps({"name": name, "error": error}), flush=True)


def _run_batch(batch: list[tuple[str, bytes, list[Any]]], timeout: float) -> dict[str, str]:
    """Run a batch in a child; a crash marks that case failed and the rest continue."""
    results: dict[str, str] = {}
    pending = list(batch)
    while pending:
        with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as handle:
            pickle.dump(pending, handle)
            path = handle.name
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "backend.compat.groundtruth", path],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            stdout, code = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            code = -9
        finally:
            Path(path).unlink(missing_ok=True)
        done = 0
        for line in stdout.splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            results[row["name"]] = row["error"]
            done += 1
        pending = pending[done:]
        if pending and code != 0:
            crashed = pending.pop(0)
            how = f"signal {-code}" if code < 0 else f"exit {code}"
            results[crashed[0]] = f"child crashed ({how})"
        elif pending:
            break
    return results


def run_cases(
    cases: list[NodeCase], registry: KernelRegistry | None = None, jobs: int = 2, batch: int = 60
) -> Confusion:
    """Predict and really run every case; returns the confusion of prediction against truth."""
    registry = registry or load_registry()
    payload = [(c.name, c.model.SerializeToString(), c.inputs) for c in cases]
    batches = [payload[i : i + batch] for i in range(0, len(payload), batch)]
    errors: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(lambda b: _run_batch(b, timeout=600), batches):
            errors.update(result)
    confusion = Confusion()
    for case in cases:
        predicted, reason = predict_case(case.model, registry)
        error = errors.get(case.name, "not run")
        confusion.outcomes.append(
            CaseOutcome(case.name, case.op, predicted, error == "", reason, error)
        )
    return confusion


if __name__ == "__main__":
    _worker(sys.argv[1])
