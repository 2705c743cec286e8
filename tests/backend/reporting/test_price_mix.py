"""The sentence for jobs that price the same hardware differently (backend/reporting/price_mix)."""

from __future__ import annotations

import math

import pandas as pd

from backend.reporting.price_mix import mixed_prices


def _frame(rows: list[tuple[int, str | None, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["job_id", "priced_as", "price_per_hour"])


def test_two_jobs_pricing_the_cpu_differently_are_named_with_each_price() -> None:
    frame = _frame([(1, "cpu", 0.4), (1, "cpu", 0.4), (5, "cpu", 1.0), (5, "cuda", 3.5)])
    assert mixed_prices(frame) == (
        "These jobs were priced differently, so their costs are not like for like: cpu at "
        "$0.40/h in job 1, $1.00/h in job 5 (each job's stored prices; give one price table "
        "above to compare them alike)."
    )


def test_alike_prices_one_job_or_unpriced_rows_say_nothing() -> None:
    assert mixed_prices(_frame([(1, "cpu", 0.4), (5, "cpu", 0.4), (5, "cuda", 3.5)])) is None
    assert mixed_prices(_frame([(1, "cpu", 0.4), (1, "cuda", 3.5)])) is None
    assert mixed_prices(_frame([(1, "cpu", 0.4), (5, None, math.nan)])) is None
