"""How far a configuration's outputs are from the FP32 reference on the same inputs.

Relative error is |a - b| / (|a| + eps) with eps = REL_EPS_FRACTION * mean(|a|) of that output
(plus a tiny floor), so elements near zero, such as small softmax probabilities, do not turn a
good result into a huge relative error.
"""

from __future__ import annotations

import numpy as np

from backend.results import AccuracyReport

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
    max_abs = 0.0
    rel_sum = 0.0
    rel_count = 0
    cosines: list[float] = []
    top1_agree = 0
    top1_rows = 0
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
            a = ref.astype(np.float64).ravel()
            b = cand.astype(np.float64).ravel()
            diff = np.abs(a - b)
            max_abs = max(max_abs, float(diff.max()))
            eps = REL_EPS_FRACTION * float(np.abs(a).mean()) + REL_EPS_FLOOR
            rel_sum += float((diff / (np.abs(a) + eps)).sum())
            rel_count += a.size
            cosines.append(_cosine(a, b))
            if _looks_like_class_scores(ref):
                top1_agree += int((ref.argmax(axis=1) == cand.argmax(axis=1)).sum())
                top1_rows += ref.shape[0]
    return AccuracyReport(
        max_abs_error=max_abs,
        mean_rel_error=rel_sum / rel_count if rel_count else 0.0,
        cosine_similarity=float(np.mean(cosines)) if cosines else 1.0,
        top1_agreement=top1_agree / top1_rows if top1_rows else None,
        compared_outputs=len(compared),
        samples=len(reference),
    )
