"""Synthetic results for bench/ only: hand-made payloads in the worker's format, in bulk.

Page and backend tests never use these; they seed through the real ingest and a real run of
the worker (tests/pages/seed.py). The dashboard render bench needs hundreds of configurations
with a thousand samples each, which real runs cannot produce in a bench's time.
"""

from __future__ import annotations

import numpy as np

from backend.results import ConfigurationResult, LatencyStats
from backend.specs import Configuration
from storage.repo import results as result_store
from storage.repo.results import ResultRow


def save_synthetic_result(job_id: int, config: Configuration, samples_ms: np.ndarray) -> ResultRow:
    """Store a made-up successful result with the given latency samples (bench/ only)."""
    stats = LatencyStats.from_samples(samples_ms)
    result = ConfigurationResult(
        config_key=config.key,
        configuration=config,
        status="ok",
        error=None,
        providers_requested=["CPUExecutionProvider"],
        providers_used=["CPUExecutionProvider"],
        session_create_ms=12.5,
        first_inference_ms=float(samples_ms[0]) * 3,
        latency=stats,
        throughput=config.batch_size * 1000.0 / stats.mean,
        stable=True,
        windows=[stats.p50] * 3,
        measure_seconds=float(np.sum(samples_ms)) / 1000,
        peak_rss_mb=180.0 + config.batch_size * 0.5,
        model_size_bytes=4096,
        node_count_before=6,
        node_count_after=6,
        environment={"synthetic": True},
    )
    return result_store.save_result(job_id, result.to_dict(), [float(x) for x in samples_ms])
