"""Where INT8 loses accuracy: intermediate activations of the FP32 and QDQ models, node by node.

Both models are augmented with onnxruntime.quantization's QDQ debugging helper so every float
tensor becomes an output; they run on the same accuracy inputs, and each node of the QDQ model is
scored by how many dB of signal-to-quantization-noise ratio (SQNR, against FP32) it loses between
its inputs and its output. The node that loses most is where the error enters.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx

from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions

SQNR_CAP_DB = 100.0  # identical tensors; also the score of an unquantized graph input
_POST = "_DequantizeLinear_Output"
_SKIP = {"QuantizeLinear", "DequantizeLinear"}


@dataclass(frozen=True)
class NodeLoss:
    """One node of the INT8 model: SQNR of what it reads and of what it hands on, in dB."""

    node: str
    op_type: str
    input_sqnr_db: float
    output_sqnr_db: float

    @property
    def loss_db(self) -> float:
        return max(0.0, self.input_sqnr_db - self.output_sqnr_db)


def sqnr_db(reference: list[np.ndarray], candidate: list[np.ndarray]) -> float:
    """10 log10(signal / noise) over all samples; SQNR_CAP_DB when they are identical."""
    ref = np.concatenate([np.asarray(r, dtype=np.float64).ravel() for r in reference])
    cand = np.concatenate([np.asarray(c, dtype=np.float64).ravel() for c in candidate])
    noise = float(np.sum((ref - cand) ** 2))
    signal = float(np.sum(ref**2))
    if noise == 0.0:
        return SQNR_CAP_DB
    if signal == 0.0:
        return -SQNR_CAP_DB
    return float(min(SQNR_CAP_DB, 10.0 * np.log10(signal / noise)))


def activations(model_path: Path, feeds: list[dict[str, np.ndarray]]) -> dict[str, list]:
    """Every float tensor of the model on each feed, by tensor name (graph unoptimized)."""
    from onnxruntime.quantization import qdq_loss_debug

    suffix = getattr(qdq_loss_debug, "_TENSOR_SAVE_POSTFIX", "_ReshapedSavedOutput")
    with tempfile.TemporaryDirectory(prefix="optiboard-acts-") as tmp:
        augmented, staged = Path(tmp) / "augmented.onnx", Path(tmp) / "model.onnx"
        # ORT writes a "<model>-inferred" copy beside the path it is given: here, not beside the
        # stored model (read-only inside the measurement sandbox)
        staged.symlink_to(Path(model_path).resolve())
        qdq_loss_debug.modify_model_output_intermediate_tensors(str(staged), str(augmented))
        options = SessionOptions.plain(optimization_level="disable")
        found: dict[str, list] = defaultdict(list)
        with get_runtime("onnxruntime").open(augmented, options) as runner:
            names = runner.output_names()
            for feed in feeds:
                for name, value in zip(names, runner.infer(feed), strict=True):
                    found[name.removesuffix(suffix)].append(value)
    return dict(found)


def _float_name(tensor: str) -> str:
    return tensor.removesuffix(_POST)


def rank_nodes(
    float_path: Path, qdq_path: Path, feeds: list[dict[str, np.ndarray]]
) -> list[NodeLoss]:
    """Nodes of the QDQ model by the SQNR they lose, worst first. Names are the QDQ model's, so
    they can be kept in FP32 (Configuration.fp32_nodes).

    Like is compared with like: a node is scored only when every float activation it reads and
    at least one it writes is the same tensor in the FP32 model (the graph inputs count, with the
    feeds as their values; weights are the node's own and count as its loss). A node reading a
    tensor the FP32 model has not got (one made by ORT's pre-processing) is not comparable and
    is left out of the ranking, never scored against an assumed perfect input.
    """
    fp32 = activations(float_path, feeds)
    float_model = onnx.load(str(float_path), load_external_data=False)
    weights = {t.name for t in float_model.graph.initializer}
    for graph_input in float_model.graph.input:
        if graph_input.name not in weights and all(graph_input.name in f for f in feeds):
            fp32.setdefault(graph_input.name, [f[graph_input.name] for f in feeds])
    int8 = activations(qdq_path, feeds)

    def seen(tensor: str) -> list | None:
        return int8.get(tensor + _POST, int8.get(tensor))

    def score(tensor: str) -> float | None:
        reference = fp32.get(_float_name(tensor))
        values = seen(tensor)
        if values is None or reference is None:
            return None
        return sqnr_db(reference, values)

    losses = []
    model = onnx.load(str(qdq_path), load_external_data=False)
    for node in model.graph.node:
        if node.op_type in _SKIP:
            continue
        outputs = [s for s in (score(t) for t in node.output) if s is not None]
        if not outputs:
            continue
        # the float activations it reads (weights are the node's own: they count as its loss)
        reads = [t for t in node.input if t and seen(t) is not None]
        inputs = [score(t) for t in reads if _float_name(t) not in weights]
        if any(s is None for s in inputs):
            continue  # not comparable: it reads a tensor the FP32 model has not got
        scored = [s for s in inputs if s is not None]
        losses.append(
            NodeLoss(node.name, node.op_type, min(scored, default=SQNR_CAP_DB), min(outputs))
        )
    return sorted(losses, key=lambda loss: -loss.loss_db)


def to_dicts(losses: list[NodeLoss], count: int = 10) -> list[dict[str, object]]:
    """The worst nodes as plain data, for the stored result."""
    return [{**asdict(loss), "loss_db": loss.loss_db} for loss in losses[:count]]


def from_dicts(rows: list[dict[str, object]]) -> list[NodeLoss]:
    fields = ("node", "op_type", "input_sqnr_db", "output_sqnr_db")
    return [NodeLoss(**{k: row[k] for k in fields}) for row in rows]  # type: ignore[arg-type]


def loss_line(losses: list[NodeLoss], count: int = 3) -> str | None:
    """'Accuracy is lost mostly at bad_matmul (MatMul): SQNR 38 dB -> 2 dB ...'."""
    worst = [loss for loss in losses[:count] if loss.loss_db >= 1.0]
    if not worst:
        return None
    parts = [
        f"{w.node} ({w.op_type}): SQNR {w.input_sqnr_db:.0f} -> {w.output_sqnr_db:.0f} dB"
        for w in worst
    ]
    return (
        "INT8 accuracy is lost mostly at "
        + "; ".join(parts)
        + " (against FP32 on the accuracy inputs); keeping the first in FP32 is the likeliest fix."
    )
