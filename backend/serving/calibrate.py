"""Fitting what a one-request-at-a-time curve cannot see, from one measured loaded point."""

from __future__ import annotations

from dataclasses import replace

from backend.serving.simulate import RANKING_REQUESTS, simulate
from backend.serving.types import LatencyCurve, LoadPoint


def calibrate(curve: LatencyCurve, measured: LoadPoint, steps: int = 12) -> LatencyCurve:
    """The curve that reproduces one measured saturated point: serial cost, then overhead noise.

    Why: a curve measured one request at a time cannot see what runs serially per request
    (client, frontend, backend hop) and caps throughput under load, nor how much a shared CPU
    stretches the way in and out; one loaded point shows both. The serial cost is bisected until
    the simulated throughput matches (the same time leaves the pure delay, where one request in
    flight counted it), then the overhead's jitter until the simulated p99 matches.
    """

    def fitted(cost: float, cv: float) -> LatencyCurve:
        overhead = max(0.0, curve.overhead_ms - cost)
        return replace(curve, request_cost_ms=cost, overhead_ms=overhead, overhead_jitter=cv)

    def point(trial: LatencyCurve) -> LoadPoint:
        return simulate(trial, measured.spec, measured.policy, requests=RANKING_REQUESTS)

    low, high = 0.0, 1000.0 / max(measured.achieved_rps, 1e-9)
    for _ in range(steps):
        middle = (low + high) / 2
        low, high = (
            (middle, high)
            if point(fitted(middle, 0.0)).achieved_rps > measured.achieved_rps
            else (low, middle)
        )
    cost = (low + high) / 2
    low, high = 0.0, 8.0
    if point(fitted(cost, 0.0)).latency.p99 >= measured.latency.p99:
        return fitted(cost, 0.0)
    for _ in range(steps):
        middle = (low + high) / 2
        low, high = (
            (middle, high)
            if point(fitted(cost, middle)).latency.p99 < measured.latency.p99
            else (low, middle)
        )
    return fitted(cost, (low + high) / 2)
