"""Data-parallel throughput: N copies of one configuration on N devices of one node, at once.

The N tasks share a placement group of N bundles packed onto one node (STRICT_PACK), each with
one GPU (or 1/N of the node's measurement slot for CPU), so Ray starts all of them together or
none. The result pools their samples for the latency, sums their throughputs for the aggregate,
keeps each device's own throughput, and says how much of their wall windows overlapped (each
replica builds its variant first, so the windows are close but not identical).
"""

from __future__ import annotations

from typing import Any

from backend.cluster.targets import ask_for
from backend.cluster.task import NodeOutcome
from backend.results import ConfigurationResult, LatencyStats, ResultStatus
from backend.specs import Configuration


def placement(config: Configuration) -> Any:
    """A placement group holding one bundle per replica on one node; ready when all fit."""
    from ray.util.placement_group import placement_group

    bundle = ask_for(config).bundle()
    return placement_group([bundle] * config.replicas, strategy="STRICT_PACK")


def window_overlap(outcomes: list[NodeOutcome]) -> float:
    """Share of the longest replica's wall window during which all replicas were running."""
    common = min(o.ended for o in outcomes) - max(o.started for o in outcomes)
    longest = max(o.ended - o.started for o in outcomes)
    return max(common, 0.0) / longest if longest > 0 else 0.0


def merge(config: Configuration, outcomes: list[NodeOutcome]) -> ConfigurationResult:
    """One result for the configuration from its replicas' results (in replica order), each
    read from the node's JSON once."""
    results = [ConfigurationResult.from_dict(o.result, configuration=config) for o in outcomes]
    first = results[0]
    failed = next((r for r in results if not r.ok), None)
    if failed is not None:
        index = results.index(failed)
        failed.config_key = config.key
        failed.error = f"replica {index + 1} of {len(results)}: {failed.error}"
        failed.environment.setdefault("cluster", first.environment.get("cluster"))
        return failed
    samples = [s for r in results for s in r.samples_ms]
    per_device = [r.throughput or 0.0 for r in results]
    first.samples_ms = samples
    first.latency = LatencyStats.from_samples(samples)
    first.throughput = sum(per_device)
    first.stable = all(r.stable for r in results)
    first.telemetry["replicas"] = {
        "count": len(results),
        "per_device_throughput": per_device,
        "aggregate_throughput": sum(per_device),
        "devices": [r.environment.get("cluster", {}).get("gpu_ids") for r in results],
        "window_overlap": window_overlap(outcomes),
    }
    first.notes.append(
        f"{len(results)} replicas on one node: aggregate {sum(per_device):.1f}/s, "
        f"per device {', '.join(f'{t:.1f}' for t in per_device)}/s."
    )
    first.status = ResultStatus.OK
    return first
