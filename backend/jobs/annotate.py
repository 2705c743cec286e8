"""The plain "why" lines of a measured result, for the local sweep and the cluster driver alike."""

from __future__ import annotations

from pathlib import Path

from backend.engine.explain import explain
from backend.engine.layerloss import from_dicts
from backend.engine.profile import Profile
from backend.results import ConfigurationResult, StoredResult
from backend.specs import Configuration, Precision


def annotate(
    result: ConfigurationResult,
    config: Configuration,
    op_histogram: dict[str, int],
    cpu: dict[str, bool],
    baseline: StoredResult | None,
) -> None:
    """Add the "why" lines, against `baseline`: the FP32 result of the same runtime, provider
    and batch (backend.results.fp32_baseline), taken from the results the run holds."""
    if not result.ok or result.latency is None:
        return
    speedup = None
    if config.precision != Precision.FP32 and baseline is not None and baseline.latency is not None:
        speedup = baseline.latency.p50 / result.latency.p50
    profile_path = result.environment.get("profile_path")
    profile = Profile.load(Path(profile_path)) if profile_path else None
    # the rules of thumb explain ONNX Runtime's kernels; a profile explains any runtime's
    explained = speedup if config.backend == "onnxruntime" or profile else None
    result.notes.extend(
        explain(
            config.precision,
            config.provider,
            explained,
            op_histogram,
            cpu,
            result.accuracy,
            profile=profile,
            losses=from_dicts(result.environment.get("accuracy_loss") or []),
        )
    )
    if speedup is not None:
        result.telemetry["speedup_vs_fp32"] = speedup
