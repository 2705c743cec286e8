"""The sentence a comparison needs when its jobs price the same hardware differently.

Each row is priced by its own job's stored prices (backend/reporting/cost.py), so comparing a
sweep queued at cpu=$0.40/h with one queued at cpu=$1/h ranks the same CPU at two prices: the
cheapest sentence and the cost chart then mix the hardware's speed with the price each job was
given. Kept out of cost.py (which prices rows) because this only reads the priced frame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


def _per_hour(value: float) -> str:
    return f"${value:.2f}/h" if value < 100 else f"${value:,.0f}/h"


def mixed_prices(frame: pd.DataFrame, remedy: str = "give one price table above") -> str | None:
    """One sentence naming, per hardware price name, the hourly price of each job where the
    jobs compared differ, and the remedy where it is read (the page's field, the CLI's
    --price); None when every job prices each name alike (or one job is shown)."""
    priced = frame[np.isfinite(frame["price_per_hour"].astype(float)) & frame["priced_as"].notna()]
    parts = []
    for name, rows in priced.groupby("priced_as", sort=True):
        by_job = rows.groupby("job_id")["price_per_hour"].first().sort_index()
        if by_job.nunique() < 2:
            continue
        each = ", ".join(f"{_per_hour(float(p))} in job {int(j)}" for j, p in by_job.items())
        parts.append(f"{name} at {each}")
    if not parts:
        return None
    return (
        "These jobs were priced differently, so their costs are not like for like: "
        + "; ".join(parts)
        + f" (each job's stored prices; {remedy} to compare them alike)."
    )
