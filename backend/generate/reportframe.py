"""A generation benchmark's report (the CLI's, not stored; points.py reads stored points) as one
flat frame: a row per runtime x point, with its runtime's perplexity and roofline."""

from __future__ import annotations

import pandas as pd

from backend.generate.dramshare import dram_share
from backend.generate.results import FIGURES as RESULT_FIGURES
from backend.generate.results import MEASURED, GenerationReport, GenerationResult

# the result's figures a row shows (results.FIGURES less its run count, first run and verdict):
# none for a point that did not run (one stored before 2026-12-08 held 0.0, which read as
# measured: 0.0 GB/s, a 0.0 share of peak)
FIGURES = tuple(f for f in RESULT_FIGURES if f not in ("first_run_ms", "runs", "stable"))


def _figures(r: GenerationResult) -> dict[str, object]:
    """The point's figures and roofline; every one None where it did not run (status, error)."""
    if r.status not in MEASURED:
        return dict.fromkeys((*FIGURES, "bandwidth_gb_s", "bandwidth_fraction", "stable"))
    roof = r.roofline or {}
    achieved = roof.get("achieved_bytes_s")
    return {
        **{key: getattr(r, key) for key in FIGURES},
        "bandwidth_gb_s": achieved / 1e9 if achieved is not None else None,
        "bandwidth_fraction": dram_share(roof),  # none where the step's bytes sat in cache
        "stable": r.stable,
    }


def generation_frame(report: GenerationReport) -> pd.DataFrame:
    """Every result, measured or not (status and error say why not; no figures then), with its
    runtime's perplexity and the bandwidth roofline flattened."""
    rows = []
    for r in report.results:
        scored = report.perplexity.get(r.runtime, {}) if r.status in MEASURED else {}
        rows.append(
            {
                "runtime": r.runtime,
                "precision": r.precision,
                "prompt_tokens": r.prompt_tokens,
                "new_tokens": r.new_tokens,
                "sequences": r.sequences,
                "status": r.status,
                **_figures(r),
                "agreement_tokens": min(r.agreement) if r.agreement else None,
                "perplexity": scored.get("perplexity"),
                "j_per_token": r.energy.j_p50 if r.energy else None,
                "energy_source": r.energy.source if r.energy else "",
                "error": r.error,
            }
        )
    return pd.DataFrame(rows)
