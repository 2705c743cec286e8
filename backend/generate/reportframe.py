"""A generation benchmark's report (the CLI's, not stored; points.py reads stored points) as one
flat frame: a row per runtime x point, with its runtime's perplexity and roofline."""

from __future__ import annotations

import pandas as pd

from backend.generate.benchmark import GenerationReport
from backend.generate.dramshare import dram_share


def generation_frame(report: GenerationReport) -> pd.DataFrame:
    """Every result, measured or not (status and error say why not), with its runtime's
    perplexity and the bandwidth roofline flattened."""
    rows = []
    for r in report.results:
        roof = r.roofline or {}
        scored = report.perplexity.get(r.runtime, {})
        rows.append(
            {
                "runtime": r.runtime,
                "precision": r.precision,
                "prompt_tokens": r.prompt_tokens,
                "new_tokens": r.new_tokens,
                "sequences": r.sequences,
                "status": r.status,
                "ttft_p50_ms": r.ttft_p50_ms,
                "ttft_p99_ms": r.ttft_p99_ms,
                "itl_p50_ms": r.itl_p50_ms,
                "itl_p99_ms": r.itl_p99_ms,
                "e2e_p50_ms": r.e2e_p50_ms,
                "output_tokens_per_s": r.output_tokens_per_s,
                "decode_tokens_per_s": r.decode_tokens_per_s,
                "weights_mb": r.weights_mb,
                "kv_cache_mb": r.kv_cache_mb,
                "peak_rss_mb": r.peak_rss_mb,
                "bandwidth_gb_s": roof.get("achieved_bytes_s", 0.0) / 1e9,
                # none where the step's bytes sat in cache; 0.0, as its GB/s, where it did not run
                "bandwidth_fraction": dram_share(roof) if roof else 0.0,
                "agreement_tokens": min(r.agreement) if r.agreement else None,
                "perplexity": scored.get("perplexity"),
                "j_per_token": r.energy.j_p50 if r.energy else None,
                "energy_source": r.energy.source if r.energy else "",
                "stable": r.stable,
                "error": r.error,
            }
        )
    return pd.DataFrame(rows)
