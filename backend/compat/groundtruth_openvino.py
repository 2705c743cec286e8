"""Ground truth for the OpenVINO column: ONNX's node tests, predicted by the column and really
compiled and run by OpenVINO's CPU plugin.

The prediction is what the matrix shows (read_model, query_model per op, compile_model); the
truth is OpenVINO compiling the case and running it on the case's inputs. Both happen in child
processes, batch by batch, so an OpenVINO crash costs one case, not the bench.
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from backend.compat.build import custom_domain_cell, model_context
from backend.compat.columns import COLUMNS
from backend.compat.groundtruth import CaseOutcome, Confusion, NodeCase, decode_input, run_batch
from backend.runtimes import run_on_openvino_once

MODULE = "backend.compat.groundtruth_openvino"


def predict_openvino(path: Path) -> tuple[bool, str]:
    """True when the OpenVINO column says every node runs; else the first node's reason."""
    nodes, context = model_context(path)
    column = COLUMNS["openvino"]
    for node in nodes:
        cell = custom_domain_cell(node, context.registry) or context.cell(column, node)
        if not cell.status.runs:
            return False, f"{node.op_type}: {cell.reason}"
    return True, ""


def _worker(batch_file: str, results_file: str) -> None:
    """Child: predict and really run each case, one JSON line per finished case."""
    with open(batch_file) as cases, open(results_file, "a") as results:
        for line in cases:
            row = json.loads(line)
            model_bytes = base64.b64decode(row["model"])
            with tempfile.TemporaryDirectory(prefix="optiboard-ov-case-") as tmp:
                path = Path(tmp) / "case.onnx"
                path.write_bytes(model_bytes)
                predicted, reason = predict_openvino(path)
            inputs = [decode_input(v) for v in row["inputs"]]
            error = run_on_openvino_once(model_bytes, inputs)
            done = {"name": row["name"], "error": error, "predicted": predicted, "reason": reason}
            results.write(json.dumps(done) + "\n")
            results.flush()


def run_cases_openvino(cases: list[NodeCase], jobs: int = 2, batch: int = 60) -> Confusion:
    """Predict and really run every case on OpenVINO; the confusion of prediction and truth.

    A case whose child crashed counts as predicted-fails and failed (OpenVINO did not run it),
    with the crash as its error, so that crashes show in the disagreements only if predicted."""
    batches = [cases[i : i + batch] for i in range(0, len(cases), batch)]
    rows: dict[str, dict] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(lambda b: run_batch(b, timeout=900, module=MODULE), batches):
            rows.update(result)
    confusion = Confusion()
    for case in cases:
        row = rows.get(case.name, {"error": "not run"})
        error = row["error"]
        predicted = bool(row.get("predicted", False))
        reason = row.get("reason", f"crashed: {error}")
        confusion.outcomes.append(
            CaseOutcome(case.name, case.op, predicted, error == "", reason, error)
        )
    return confusion


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
