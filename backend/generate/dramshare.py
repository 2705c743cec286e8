"""A decode step's share of the device's peak memory bandwidth, and its one rule: where every
byte the step reads sat in the last-level cache (a CPU's L3, a GPU's L2), the share would be of
cache traffic, so none is given against the DRAM (HBM) peak. The Compare page's frame (points),
the CLI report's frame (reportframe) and the CLI's `of peak` cell (cli_verbs, jobreport) read
the rule here, and the sentence that says why, once for the points it covers (the CLI said it
once a point). No numpy: the CLI's parser imports this, and roofline.py, which computes the
figures, imports numpy and NVML."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from backend.counts import counted

IN_CACHE = "in cache"  # the CLI's `of peak` cell where the rule gives no share


def mb(size: float) -> str:
    """In the product's MB (2**20 bytes), as the memory columns and charts beside it."""
    return f"{size / 2**20:.3g} MB"


def dram_share(roof: Mapping[str, Any]) -> float | None:
    """The step's share of the DRAM (HBM) peak, from a roofline as roofline.Roofline.to_dict
    stores it; None where its bytes sat in cache, or no share was stored."""
    return None if roof.get("in_cache") else roof.get("fraction")


def of_peak(roof: Mapping[str, Any]) -> str:
    """The CLI's `of peak` cell: the share as a percentage, IN_CACHE where the rule gives none,
    "-" without a roofline."""
    if not roof:
        return "-"
    share = dram_share(roof)
    return IN_CACHE if roof.get("in_cache") else f"{share if share is not None else 0:.0%}"


def held_in(roof: Mapping[str, Any]) -> str:
    """The cache a step's bytes sat in ("32 MB L3"); "" where they did not, or its size is
    unknown."""
    peak = roof.get("peak") or {}
    if not roof.get("in_cache") or not peak.get("cache_bytes"):
        return ""
    return f"{mb(peak['cache_bytes'])} {peak['cache_level']}"


def in_cache_notes(cached: Iterable[tuple[str, str, float]], measured: int) -> list[str]:
    """Why there is no share of the DRAM peak: one sentence per cache, naming the points
    (name, held_in's cache, MB a decode step reads) whose step fit in it, or "all N points"
    where they are every one of the `measured` points."""
    caches: dict[str, list[tuple[str, float]]] = {}
    for name, cache, step_mb in cached:
        caches.setdefault(cache, []).append((name, step_mb))
    lines = []
    for cache, group in caches.items():
        low, high = (f"{f(step for _, step in group):.3g}" for f in (min, max))
        read = f"{high} MB" if low == high else f"{low} to {high} MB"
        who = (
            f"all {len(group)} points"
            if len(group) == measured > 1
            else f"{counted(len(group), 'point')} ({'; '.join(name for name, _ in group)})"
        )
        lines.append(
            f"No share of peak bandwidth is shown for {who}: the {read} a decode step reads "
            f"(weights less the lookup tables, + KV cache) fit in the {cache}, so the share "
            "would be of cache traffic, not a memory-bandwidth figure."
        )
    return lines
