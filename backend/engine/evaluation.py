"""Accuracy on the user's own evaluation set: an .npz of inputs, with optional integer `labels`.

The file is read the way a calibration .npz is (backend.engine.npzfeeds.read_calibration_npz:
headers checked before anything is allocated, never unpickled), in a limited child whenever the
web process checks an upload. With labels, each configuration gets its top-1 accuracy against
them; without, only its agreement with FP32 on these inputs (which is what it then means).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from backend.counts import counted
from backend.engine.inputs import input_specs_of
from backend.engine.npzfeeds import read_calibration_npz
from backend.errors import UserError

if TYPE_CHECKING:  # the sandboxed upload check imports this module without storage/ at hand
    from backend.results import EvaluationReport

LABELS = "labels"


@dataclass
class EvaluationSet:
    """Batch-1 feeds, one per sample, and the class index of each sample where labels exist."""

    feeds: list[dict[str, np.ndarray]]
    labels: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)


def read_evaluation_npz(
    path: Path, specs: list[dict], symbolic_dims: dict[str, int]
) -> EvaluationSet:
    """Check an evaluation .npz against the model's inputs; labels must be one int per sample."""
    checked = read_calibration_npz(path, specs, symbolic_dims, optional=(LABELS,))
    labels = checked.extra.get(LABELS)
    if labels is None:
        return EvaluationSet(checked.feeds, None, checked.notes)
    name = Path(path).name
    if labels.dtype.kind not in "iu":
        raise UserError(
            f"The labels in {name} have dtype {labels.dtype}; save one integer class index per "
            "sample, such as labels=np.array([3, 0, 7])."
        )
    labels = labels.reshape(-1) if labels.ndim == 2 and labels.shape[1] == 1 else labels
    if labels.ndim != 1 or len(labels) != len(checked.feeds):
        raise UserError(
            f"{name} holds {len(checked.feeds)} samples but labels of shape "
            f"{list(labels.shape)}; give exactly one class index per sample."
        )
    if len(labels) and int(labels.min()) < 0:
        raise UserError(f"The labels in {name} include negative class indices; use 0 and up.")
    return EvaluationSet(checked.feeds, labels.astype(np.int64), checked.notes)


def child_check_evaluation(path: str, model: str, symbolic_dims: dict) -> dict[str, Any]:
    """Child side of the upload check (backend.engine.calibration.check_npz_in_child): the
    .npz against the inputs of the ONNX file `model`."""
    checked = read_evaluation_npz(Path(path), input_specs_of(Path(model)), symbolic_dims)
    return {
        "samples": len(checked.feeds),
        "labelled": checked.labels is not None,
        "notes": checked.notes,
    }


def batches(eval_set: EvaluationSet, batch_size: int) -> list[tuple[dict[str, np.ndarray], int]]:
    """(feed of batch_size rows, rows that are real samples): consecutive samples joined; the
    last batch is filled by repeating its first sample, and those repeats are never scored."""
    out = []
    feeds = eval_set.feeds
    for start in range(0, len(feeds), batch_size):
        group = feeds[start : start + batch_size]
        real = len(group)
        group = group + [group[0]] * (batch_size - real)
        out.append(({k: np.concatenate([g[k] for g in group]) for k in group[0]}, real))
    return out


def _class_scores(outputs: list[np.ndarray]) -> np.ndarray | None:
    """The first float output shaped (batch, classes), as a classifier's scores or logits."""
    for array in outputs:
        if array.dtype.kind == "f" and array.ndim == 2 and array.shape[1] > 1:
            return array
    return None


def _top1(
    outputs: list[list[np.ndarray]], rows: list[int], labels: np.ndarray | None
) -> float | None:
    if labels is None:
        return None
    predicted = []
    for batch, real in zip(outputs, rows, strict=True):
        scores = _class_scores(batch)
        if scores is None:
            return None
        predicted.extend(scores[:real].argmax(axis=1).tolist())
    return float(np.mean(np.asarray(predicted) == labels)) if predicted else None


def evaluate(
    eval_set: EvaluationSet,
    sha256: str,
    rows: list[int],
    reference: list[list[np.ndarray]],
    candidate: list[list[np.ndarray]],
    output_names: list[str] | None = None,
) -> EvaluationReport:
    """Top-1 against the labels for the candidate and FP32, and the candidate's agreement with
    FP32, over the real rows of each batch (padding rows dropped)."""
    from backend.engine.accuracy import compare_outputs
    from backend.results import EvaluationReport

    def real_rows(outputs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        return [
            [o[:real] if o.ndim and o.shape[0] >= real else o for o in batch]
            for batch, real in zip(outputs, rows, strict=True)
        ]

    agreement = compare_outputs(real_rows(reference), real_rows(candidate), output_names)
    return EvaluationReport(
        set_sha256=sha256,
        samples=len(eval_set.feeds),
        labelled=eval_set.labels is not None,
        top1_accuracy=_top1(candidate, rows, eval_set.labels),
        fp32_top1_accuracy=_top1(reference, rows, eval_set.labels),
        top1_agreement=agreement.top1_agreement,
        cosine_similarity=agreement.cosine_similarity,
    )


def evaluation_line(report: EvaluationReport, filename: str | None = None) -> str:
    """'Top-1 accuracy 87.5% on eval.npz (64 labelled samples; FP32 90.6%), 96.9% agreement.'"""
    named = filename or f"evaluation set {report.set_sha256[:12]}"
    agreement = (
        f"{report.top1_agreement:.1%} top-1 agreement with FP32"
        if report.top1_agreement is not None
        else f"cosine {report.cosine_similarity:.4f} to FP32"
    )
    if report.top1_accuracy is None:
        why = (
            "labels not scored: the model has no (batch, classes) output"
            if report.labelled
            else "no labels"
        )
        return f"On {named} ({counted(report.samples, 'sample')}, {why}): {agreement}."
    fp32 = (
        f"; FP32 {report.fp32_top1_accuracy:.1%}" if report.fp32_top1_accuracy is not None else ""
    )
    return (
        f"Top-1 accuracy {report.top1_accuracy:.1%} on {named} ({report.samples} labelled "
        f"samples{fp32}); {agreement}."
    )
