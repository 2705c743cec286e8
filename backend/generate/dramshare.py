"""A decode step's share of the device's peak memory bandwidth, and its one rule: where every
byte the step reads sat in the last-level cache (a CPU's L3, a GPU's L2), the share would be of
cache traffic, so none is given against the DRAM (HBM) peak. The Compare page's frame (points),
the CLI report's frame (reportframe) and the CLI's `of peak` cell (cli_verbs, jobreport) read
the rule here; it was written in each of them. No numpy: the CLI's parser imports this, and
roofline.py, which computes the figures, imports numpy and NVML."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

IN_CACHE = "in cache"  # the CLI's `of peak` cell where the rule gives no share


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
