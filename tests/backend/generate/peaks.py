"""One run that measures a point alone and again after a larger one, for the runtimes' memory
between points (GenAISession.between_points)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.generate.benchmark import GenerationSpec
from backend.generate.measuring import run_generation


def alone_larger_after(folder: Path, runtime: str, larger: int, **run: Any) -> tuple[float, ...]:
    """Peak RSS (MB) of 1 sequence of 200 tokens alone, of `larger` sequences, and of 1 sequence
    after them, from one run: its points in order 8 new tokens x 1 and x `larger`, then 9 x 1 and
    x `larger`. The first point is alone as in a run of its own (nothing ran before it); the
    third comes after the larger one, its one more token's KV cache a few hundred bytes."""
    spec = GenerationSpec(
        runtimes=(runtime,),
        prompt_lengths=(200,),
        new_tokens=(8, 9),
        sequences=(1, larger),
        preset="quick",
    )
    report = run_generation(folder, spec, **run)
    assert [r.status for r in report.results] == ["ok"] * 4, report.results
    alone, big, after, _ = (r.peak_rss_mb for r in report.results)
    return alone, big, after
