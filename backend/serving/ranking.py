"""Ranking batching policies by simulation, and the grid of candidates to rank.

Hundreds of policies are ranked in a fraction of a second: each is a bounded simulation of
RANKING_REQUESTS requests over the same seeded arrivals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from backend.serving.simulate import RANKING_REQUESTS, simulate
from backend.serving.types import BatchingPolicy, LatencyCurve, LoadPoint, LoadSpec


@dataclass(frozen=True)
class RankedPolicy:
    """One policy's predicted point under the load, and whether it meets the p99 bound."""

    policy: BatchingPolicy
    point: LoadPoint
    meets_slo: bool

    @property
    def p99_ms(self) -> float:
        return self.point.latency.p99


def rank_policies(
    curve: LatencyCurve,
    load: LoadSpec,
    policies: list[BatchingPolicy],
    slo_p99_ms: float,
    *,
    requests: int = RANKING_REQUESTS,
) -> list[RankedPolicy]:
    """Best first: policies meeting the bound by throughput then p99, then the rest by p99.

    Every policy sees the same seeded arrivals (common random numbers), so differences between
    them are the policy's, not the dice's.
    """
    ranked = []
    for policy in policies:
        point = simulate(curve, load, policy, requests=requests)
        ok = point.stable and point.latency.p99 <= slo_p99_ms
        ranked.append(RankedPolicy(policy, point, ok))
    ranked.sort(
        key=lambda r: (
            not r.meets_slo,
            -round(r.point.achieved_rps, 1) if r.meets_slo else 0.0,
            r.point.latency.p99,
            r.policy.instance_count,
            r.policy.max_batch_size,
        )
    )
    return ranked


def policy_grid(
    max_batch_sizes: tuple[int, ...] = (4, 8, 16, 32),
    delays_us: tuple[int, ...] = (0, 100, 500, 1000, 2000, 5000),
    instance_counts: tuple[int, ...] = (1, 2, 3),
    *,
    with_preferred: bool = True,
) -> list[BatchingPolicy]:
    """The candidate policies: no batching per instance count, then every dynamic combination.

    Preferred sets tried per max batch size: none (Triton then prefers max_batch_size), its half,
    and the powers of two up to it.
    """
    grid = [
        BatchingPolicy(
            max_batch_size=max(max_batch_sizes), dynamic_batching=False, instance_count=n
        )
        for n in instance_counts
    ]
    for size in max_batch_sizes:
        preferred_sets: list[tuple[int, ...]] = [()]
        if with_preferred and size >= 4:
            preferred_sets.append((size // 2,))
            preferred_sets.append(tuple(2**p for p in range(1, int(math.log2(size)) + 1)))
        for preferred in preferred_sets:
            for delay in delays_us:
                for count in instance_counts:
                    grid.append(
                        BatchingPolicy(
                            max_batch_size=size,
                            preferred_batch_sizes=preferred,
                            max_queue_delay_us=delay,
                            instance_count=count,
                        )
                    )
    return grid
