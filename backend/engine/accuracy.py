"""How far a configuration's outputs are from the FP32 reference on the same inputs.

Relative error is |a - b| / (|a| + eps) with eps = REL_EPS_FRACTION * mean(|a|) of that output
(plus a tiny floor), so elements near zero, such as small softmax probabilities, do not turn a
good result into a huge relative error.

A NaN or infinite value where FP32 is finite is counted, not folded into the figures (one NaN
would make every mean NaN); wrong_outputs() turns the counts and the cosine into the verdict
that keeps a configuration from being "ok".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from backend.counts import counted
from backend.results import AccuracyReport, ConfigurationResult, ResultStatus

REL_EPS_FRACTION = 1e-3
REL_EPS_FLOOR = 1e-12


def _looks_like_class_scores(array: np.ndarray) -> bool:
    return array.ndim == 2 and array.shape[1] > 1


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    norm_a = float(np.linalg.norm(a))
    norm_b = float(np.linalg.norm(b))
    if norm_a == 0.0 and norm_b == 0.0:
        return 1.0
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    return float(np.dot(a, b) / (norm_a * norm_b))


@dataclass
class _Tally:
    """Running sums over every float output of every sample."""

    max_abs: float = 0.0
    rel_sum: float = 0.0
    rel_count: int = 0
    cosines: list[float] = field(default_factory=list)
    top1_agree: int = 0
    top1_rows: int = 0
    flip_margin: float | None = None
    nan_values: int = 0
    inf_values: int = 0
    checked: int = 0

    def add(self, ref: np.ndarray, cand: np.ndarray) -> None:
        """One float output: non-finite values where FP32 is finite are counted; the error
        figures use the positions where both are finite."""
        if _looks_like_class_scores(ref):  # argmax takes the first NaN: a disagreement
            same = ref.argmax(axis=1) == cand.argmax(axis=1)
            self.top1_agree += int(same.sum())
            self.top1_rows += ref.shape[0]
            if not same.all():
                top2 = np.sort(ref[~same].astype(np.float64), axis=1)[:, -2:]
                margin = float((top2[:, 1] - top2[:, 0]).max())
                self.flip_margin = max(self.flip_margin or 0.0, margin)
        a = ref.astype(np.float64).ravel()
        b = cand.astype(np.float64).ravel()
        finite_ref = np.isfinite(a)
        self.checked += int(finite_ref.sum())
        self.nan_values += int((np.isnan(b) & finite_ref).sum())
        self.inf_values += int((np.isinf(b) & finite_ref).sum())
        both = finite_ref & np.isfinite(b)
        if not both.any():  # nothing finite left to agree with FP32
            self.cosines.append(0.0 if finite_ref.any() else 1.0)
            return
        a, b = a[both], b[both]
        diff = np.abs(a - b)
        self.max_abs = max(self.max_abs, float(diff.max()))
        eps = REL_EPS_FRACTION * float(np.abs(a).mean()) + REL_EPS_FLOOR
        self.rel_sum += float((diff / (np.abs(a) + eps)).sum())
        self.rel_count += a.size
        self.cosines.append(_cosine(a, b))


def compare_outputs(
    reference: list[list[np.ndarray]],
    candidate: list[list[np.ndarray]],
    output_names: list[str] | None = None,
) -> AccuracyReport:
    """Max abs error, mean relative error, cosine and top-1 agreement over float outputs.

    reference[i][j] is output j of sample i. Integer and bool outputs are not compared.
    """
    if len(reference) != len(candidate):
        raise ValueError(
            f"reference has {len(reference)} samples but candidate has {len(candidate)}"
        )
    tally = _Tally()
    compared: set[int] = set()
    for sample, (ref_outputs, cand_outputs) in enumerate(zip(reference, candidate, strict=True)):
        if len(ref_outputs) != len(cand_outputs):
            raise ValueError(
                f"sample {sample}: reference has {len(ref_outputs)} outputs but candidate has "
                f"{len(cand_outputs)}"
            )
        for index, (ref, cand) in enumerate(zip(ref_outputs, cand_outputs, strict=True)):
            ref = np.asarray(ref)
            cand = np.asarray(cand)
            name = output_names[index] if output_names and index < len(output_names) else index
            if ref.shape != cand.shape:
                raise ValueError(
                    f"output {name!r} of sample {sample} has shape {list(cand.shape)} but the "
                    f"reference has {list(ref.shape)}"
                )
            if ref.dtype.kind != "f" or ref.size == 0:
                continue
            compared.add(index)
            tally.add(ref, cand)
    return AccuracyReport(
        max_abs_error=tally.max_abs,
        mean_rel_error=tally.rel_sum / tally.rel_count if tally.rel_count else 0.0,
        cosine_similarity=float(np.mean(tally.cosines)) if tally.cosines else 1.0,
        top1_agreement=tally.top1_agree / tally.top1_rows if tally.top1_rows else None,
        top1_rows=tally.top1_rows,
        top1_flip_margin=tally.flip_margin,
        compared_outputs=len(compared),
        samples=len(reference),
        nan_values=tally.nan_values,
        inf_values=tally.inf_values,
        finite_reference_values=tally.checked,
    )


def wrong_outputs(report: AccuracyReport | None, min_cosine: float) -> str | None:
    """Why this configuration's outputs are wrong, citing the numbers; None when they pass.

    Wrong means NaN or infinite values where FP32 is finite, or a cosine similarity against
    FP32 below the sweep's bound (SweepSpec.min_cosine, DEFAULT_MIN_COSINE unless the user set it).
    """
    if report is None:
        return None
    counts = [
        f"{count} {kind} value{'s' if count != 1 else ''}"
        for count, kind in ((report.nan_values, "NaN"), (report.inf_values, "infinite"))
        if count
    ]
    if counts:
        return (
            f"Outputs are wrong: {' and '.join(counts)} of {report.finite_reference_values} "
            f"where FP32 gives finite numbers ({counted(report.samples, 'accuracy sample')}); "
            "these timings are not compared or ranked."
        )
    if report.cosine_similarity < min_cosine:
        return (
            f"Outputs are wrong: cosine {report.cosine_similarity:.4f} against FP32, below the "
            f"bound {min_cosine:g}; these timings are not compared or ranked (set the bound with "
            "--min-cosine or on the Optimize page)."
        )
    return None


def judge(result: ConfigurationResult, min_cosine: float) -> None:
    """Mark a configuration that ran: ok, or wrong outputs with the reason as its error and first
    "why" line (so no reader mistakes the row for a precision trade-off)."""
    reason = wrong_outputs(result.accuracy, min_cosine)
    result.status = ResultStatus.WRONG_OUTPUTS if reason else ResultStatus.OK
    if reason:
        result.error = reason
        result.notes.insert(0, reason)
