"""The plain "why" lines of a measured result, for the local sweep and the cluster driver alike."""

from __future__ import annotations

from pathlib import Path

from backend.engine.explain import explain
from backend.engine.layerloss import from_dicts
from backend.engine.profile import read_profile
from backend.engine.variants import CONV_DYNAMIC_EXPECTATION
from backend.results import ConfigurationResult, StoredResult, speeds_disagree
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
    profile = read_profile(Path(profile_path)) if profile_path else None
    explained = speedup
    if (
        speedup is not None
        and baseline is not None
        and (doubt := speed_in_doubt(speedup, result, baseline.result))
    ):
        result.notes.append(doubt)
        explained = None  # no reason is given for a speed the run's own figures dispute
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
            int8_matmul=result.runtime_facts.get("int8_matmul", ""),
            variant_ops=result.telemetry.get("variant_op_histogram"),
            runtime=config.backend,
        )
    )
    if speedup is not None:
        result.telemetry["speedup_vs_fp32"] = speedup
        # the build's expectation, measured now: its why line (or its doubt) says it with the
        # figure; both read as the same advice twice
        result.notes[:] = [n for n in result.notes if n != CONV_DYNAMIC_EXPECTATION]


def speed_in_doubt(
    speedup: float, result: ConfigurationResult, baseline: ConfigurationResult
) -> str:
    """Why no reason is given for this speed against FP32 ('' when one may be): either run was
    unstable, or its median call and its throughput tell different speeds (opposite ways, or
    more than results.GAP apart), which stalls in either run cause."""
    unstable = [name for name, r in (("this configuration's", result), ("FP32's", baseline))
                if r.stable is False]  # fmt: skip
    if unstable:
        whose = " and ".join(unstable)
        measured = "measurements were" if len(unstable) > 1 else "measurement was"
        return (
            f"Speed not explained: {whose} {measured} unstable, so the "
            f"{speedup:.2f}x against FP32 is not a firm figure; rerun it on a quiet machine."
        )
    if not result.throughput or not baseline.throughput:
        return ""
    ratio = result.throughput / baseline.throughput
    if not speeds_disagree(speedup, ratio):
        return ""
    return (
        f"Speed not explained: the median call says {speedup:.2f}x FP32's speed but the "
        f"throughput says {ratio:.2f}x ({result.throughput:,.1f} against "
        f"{baseline.throughput:,.1f}/s). They disagree when calls stall (p99 "
        f"{_p99(result)} here, {_p99(baseline)} for FP32): the machine was busy; rerun it quiet."
    )


def _p99(result: ConfigurationResult) -> str:
    return f"{result.latency.p99:.3f} ms" if result.latency else "unknown"
