"""Calibration for static INT8: feeds joined to the model's batch, the reader ORT pulls them from,
and the attention nodes that stay in float.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import settings
from backend.engine.inputs import read_calibration_npz, specs_of_model
from backend.launch import sandbox
from backend.launch.children import run_call


def input_batch(model: onnx.ModelProto) -> int | None:
    """The fixed batch of the model's inputs, or None when it is dynamic."""
    for spec in specs_of_model(model):
        first = spec["shape"][0] if spec["shape"] else None
        return first if isinstance(first, int) else None
    return None


def batched_feeds(
    feeds: list[dict[str, np.ndarray]], batch: int | None
) -> list[dict[str, np.ndarray]]:
    """Join batch-1 feeds into feeds of the model's fixed batch (cycling to fill the last one).

    Activation ranges are min/max over all elements, so concatenating samples gives the same
    calibration as feeding them one by one.
    """
    if batch is None or batch == 1 or not feeds:
        return feeds
    joined = []
    for start in range(0, len(feeds), batch):
        group = [feeds[(start + i) % len(feeds)] for i in range(batch)]
        joined.append({name: np.concatenate([g[name] for g in group]) for name in group[0]})
    return joined


class FeedReader:
    """Calibration feeds one by one; mixed with ORT's CalibrationDataReader when quantizing."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self.feeds = feeds
        self._iter: Iterator[dict[str, np.ndarray]] = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._iter, None)

    def rewind(self) -> None:
        self._iter = iter(self.feeds)


def keep_attention_in_float(path: Path) -> list[str]:
    """Names of the attention nodes to leave unquantized; unnamed nodes get names in place.

    Quantizing Q.K^T and the Softmax around it to 8 bits distorts attention weights badly
    (exp amplifies the rounding of the scores); on the test transformer it drops the cosine to
    FP32 from 0.9997 to 0.88, while Conv, Gemm and weight MatMuls lose almost nothing.
    """
    model = onnx.load(str(path))
    constants = {init.name for init in model.graph.initializer}
    constants |= {
        out for node in model.graph.node if node.op_type == "Constant" for out in node.output
    }
    used = {node.name for node in model.graph.node if node.name}
    excluded = []
    for index, node in enumerate(model.graph.node):
        if not node.name:
            name = f"{node.op_type}_{index}"
            while name in used:
                name += "_"
            node.name = name
            used.add(name)
        is_attention_matmul = node.op_type == "MatMul" and not (set(node.input) & constants)
        if node.op_type == "Softmax" or is_attention_matmul:
            excluded.append(node.name)
    onnx.save(model, str(path))
    return excluded


def check_calibration(path: Path, specs: list[dict], symbolic_dims: dict[str, int]) -> dict:
    """{'samples', 'notes'} of an uploaded calibration .npz checked against the inputs.

    numpy's reader is fed an untrusted file, so it runs in a limited (sandboxed where bubblewrap
    works) child; the web process only sees the JSON answer or the child's one sentence.
    """
    path = Path(path).resolve()
    return run_call(
        "backend.engine.calibration:child_check_calibration",
        str(path),
        specs,
        dict(symbolic_dims),
        timeout_s=settings.PARSE_TIMEOUT_S.get(),
        what=f"Checking the calibration file {path.name!r}",
        sandboxed=sandbox.available().ok,
        read_only=[path],
    )


def child_check_calibration(path: str, specs: list[dict], symbolic_dims: dict) -> dict[str, Any]:
    """Child side of check_calibration: JSON in, JSON out."""
    checked = read_calibration_npz(Path(path), specs, symbolic_dims)
    return {"samples": len(checked.feeds), "notes": checked.notes}
