"""Accuracy of a generative model: perplexity on a text through the runtime's KV cache, and
greedy agreement with an FP32 reference (tokens until the first divergence)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

import settings
from backend.errors import UserError
from backend.runtimes import GenAISession


@dataclass(frozen=True)
class Perplexity:
    """exp(mean negative log-likelihood) of every predicted token of the evaluated windows."""

    perplexity: float
    mean_nll: float
    tokens: int  # tokens of the text evaluated (after the cap)
    text_tokens: int  # tokens of the whole text
    window: int  # tokens per independent window (a fresh KV cache each)
    chunk: int  # tokens appended per step through the KV cache

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_text(path: Path, cap_mb: float | None = None) -> str:
    """The text file as UTF-8, refused with one sentence when over the size cap or not text."""
    cap_mb = settings.PERPLEXITY_TEXT_MB.get() if cap_mb is None else cap_mb
    path = Path(path)
    if not path.is_file():
        raise UserError(f"The perplexity text {path.name} does not exist; give a text file.")
    size = path.stat().st_size
    if size > cap_mb * 2**20:
        raise UserError(
            f"The perplexity text {path.name} is {size / 2**20:.1f} MB, over the "
            f"{cap_mb:g} MB cap (OPTIBOARD_PERPLEXITY_TEXT_MB); give a shorter text."
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"The perplexity text {path.name} is not UTF-8 text.") from None
    if not text.strip():
        raise UserError(f"The perplexity text {path.name} is empty; give a text to score.")
    return text


def _nll(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Negative log-likelihood of ids[1:] under logits[:-1], in float64."""
    scores = logits[:-1].astype(np.float64)
    top = scores.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(scores - top).sum(axis=1)) + top[:, 0]
    return log_norm - scores[np.arange(len(ids) - 1), ids[1:]]


def perplexity(
    session: GenAISession, ids: list[int], window: int, chunk: int, max_tokens: int
) -> Perplexity:
    """Perplexity of the first max_tokens tokens, in independent windows of `window` tokens,
    each fed `chunk` tokens at a time through the runtime's KV cache (chunk >= window: one full
    forward pass per window)."""
    if window < 2 or chunk < 1:
        raise UserError("Perplexity needs a window of at least 2 tokens and chunks of 1 or more.")
    used = np.asarray(ids[:max_tokens], dtype=np.int64)
    if len(used) < 2:
        raise UserError("The perplexity text has fewer than 2 tokens; give a longer text.")
    losses = []
    for start in range(0, len(used), window):
        segment = used[start : start + window]
        if len(segment) < 2:
            break
        losses.append(_nll(session.logits(segment, chunk), segment))
    nll = np.concatenate(losses)
    mean = float(nll.mean())
    return Perplexity(float(np.exp(mean)), mean, int(len(used)), len(ids), window, chunk)


def tokens_until_divergence(tokens: np.ndarray, reference: np.ndarray) -> list[int]:
    """Per sequence, how many generated tokens equal the reference's before the first that
    differs (all of them when none does)."""
    counts = []
    for ours, theirs in zip(np.atleast_2d(tokens), np.atleast_2d(reference), strict=True):
        differ = np.nonzero(ours != theirs)[0]
        counts.append(int(differ[0]) if len(differ) else int(len(ours)))
    return counts


SPLITS_LOOKED_AT = 4  # sequences per point whose split is scored: one forward pass each


def split_margins(
    session: GenAISession,
    prompts: np.ndarray,
    tokens: np.ndarray,
    reference: np.ndarray,
    agreement: list[int],
) -> list[float]:
    """Where a sequence left the reference, the runtime's own logit of its token minus that of
    the reference's token, from its plain path (GenAISession.logits: one forward pass over the
    prompt and the tokens both agreed on): a few hundredths is a near-tie that rounding can tip,
    whole units a model that computes something else. Up to SPLITS_LOOKED_AT sequences, in
    order; none where the runtime exposes no logits. agreement: tokens_until_divergence's."""
    from backend.errors import UnavailableError

    margins: list[float] = []
    ours_all, theirs_all = np.atleast_2d(tokens), np.atleast_2d(reference)
    for prompt, ours, theirs, agreed in zip(prompts, ours_all, theirs_all, agreement, strict=True):
        if agreed >= len(ours) or len(margins) >= SPLITS_LOOKED_AT:
            continue
        prefix = np.concatenate([np.asarray(prompt), ours[:agreed]]).astype(np.int64)
        try:
            last = session.logits(prefix, len(prefix))[-1]
        except UnavailableError:
            return margins
        margins.append(round(float(last[ours[agreed]] - last[theirs[agreed]]), 4))
    return margins


def split_note(label: str, agreement: list[int], new_tokens: int, margins: list[float]) -> str:
    """One line for a point whose tokens left the reference, with the margins at the splits;
    "" where every sequence kept to it (or none was compared)."""
    left = [a for a in agreement if a < new_tokens]
    if not left:
        return ""
    gaps = ", ".join(f"{m:.4f}" for m in margins) or "not scored (no logits from this runtime)"
    return (
        f"{label}: {len(left)} of {len(agreement)} sequences left the reference (after "
        f"{min(left)} of {new_tokens} tokens at the earliest); its own logit of its token above "
        f"the reference's at the split: {gaps}"
    )
