"""Predicted vs measured serving: the batcher simulation against the real Triton server.

For each model (a tiny MLP, a small CNN, a transformer block, all from tests/models.py):
1. measure the costs on the real server (serving.costmodel.measure_costs_on_server): the
   latency-vs-batch curve, one request in flight (per-request instance work, the way in and
   out), four in flight (the generator's CPU per request, how much the generator and the
   server slow each other), two instances at four in flight (how two executions slow each
   other) and a 1000 us queue delay at one in flight (how late Triton's batcher sends a held
   batch). None of these load points is judged below (the judged delay is 2000 us);
2. for several policies and loads, measure LoadPoints on the real server and predict the same
   points with the simulation; print throughput, p99 and mean batch of both, and the error.
Goal: within 10% on throughput and 20% on p99; every point outside is listed at the end.
Points where the load generator fell behind are shown but not scored (not the server's numbers).
Every load point is measured in --repeat rounds, minutes apart (the host's speed moves), each
round measuring the costs first and the points right after; each round's points are predicted
from its own cost measurement. The rounds' spread says how far the measurement itself is
reproducible, and the same points predicted from the other round's cost measurement say how much
of the error is the host's drift between cost measurement and points. --save keeps every sample
and --replay judges a changed model on those same measurements.
Also prints how long ranking 300 policies takes. Takes several minutes; run it once.

    .venv/bin/python bench/serving_prediction.py [--duration 4] [--repeat 2] [--save F | --replay F]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backend.serving.costmodel import CostMeasurement, measure_costs_on_server  # noqa: E402
from backend.serving.ranking import policy_grid, rank_policies  # noqa: E402
from backend.serving.simulate import simulate  # noqa: E402
from backend.serving.types import (  # noqa: E402
    BatchingPolicy,
    LatencyCurve,
    LoadPoint,
    LoadSpec,
    Scenario,
)
from backend.specs import MEASURE_PRESETS  # noqa: E402
from tests import models  # noqa: E402

THROUGHPUT_GOAL, P99_GOAL = 0.10, 0.20
# One ONNX Runtime thread per instance, in the cost measurement and the points alike: an idle
# intra-op pool spins, and that CPU would read as per-request work in the host's budget.
THREADS = 1
COST_POLICY = BatchingPolicy(max_batch_size=16)  # what measure_costs_on_server serves
PROBE_DELAY_US = 1000  # the cost measurement's queue delay: not the 2000 us judged below
MODELS = {
    "mlp": (models.make_mlp, {}),
    "cnn": (models.make_cnn, {}),
    "transformer": (models.make_transformer, {"seq": 16}),
}
POLICIES = [
    BatchingPolicy(max_batch_size=16),  # Triton's default dynamic batching: no delay
    BatchingPolicy(max_batch_size=16, preferred_batch_sizes=(4, 8), max_queue_delay_us=2000),
    BatchingPolicy(max_batch_size=16, dynamic_batching=False, instance_count=2),
]


def _measure_policy(
    path: Path, policy: BatchingPolicy, dims: dict, duration: float
) -> list[LoadPoint]:
    """Closed loops at 1 and 8 in flight, then Poisson arrivals at half the rate measured at 8.

    The Server rate comes from the measurement, not the prediction, so the client is never asked
    for a rate it cannot generate.
    """
    from backend.serving.loadgen import serve_and_measure

    quick = MEASURE_PRESETS["quick"]
    closed = [LoadSpec(Scenario.CONCURRENCY, concurrency=n, duration_s=duration) for n in (1, 8)]
    common = {"measure": quick, "dims": dims, "intra_op_threads": THREADS}
    points = serve_and_measure(path, policy, closed, **common)
    rate = round(points[-1].achieved_rps * 0.5, 1)
    server = LoadSpec(Scenario.SERVER, target_rps=rate, duration_s=duration, seed=7)
    return points + serve_and_measure(path, policy, [server], **common)


def _predict(curve: LatencyCurve, measured: LoadPoint) -> LoadPoint:
    """The measured point predicted with the generator processes that really sent it."""
    return simulate(curve, measured.spec, measured.policy, senders=measured.generator_processes)


def _is_cost_load(point: LoadPoint) -> bool:
    """The one-in-flight point of the cost measurement's policy: its p50 set the way in and out."""
    return (
        point.policy == COST_POLICY
        and point.spec.scenario is Scenario.CONCURRENCY
        and point.spec.concurrency == 1
    )


@dataclass(frozen=True)
class Judged:
    """One load point measured in every round (the same policy and load), each round's
    prediction from that round's own cost measurement, and (with two rounds or more) from the next
    round's: how much the host's drift between cost measurement and points costs."""

    model: str
    rounds: list[LoadPoint]
    predictions: list[LoadPoint]
    crossed: list[LoadPoint]

    @property
    def label(self) -> str:
        spec = self.rounds[0].spec
        load = (
            f"{spec.concurrency} in flight"
            if spec.scenario is Scenario.CONCURRENCY
            else f"{spec.target_rps:g} req/s"
        )
        return f"{self.model}, {self.rounds[0].policy.label}, {load}"

    def measured(self, read: Callable[[LoadPoint], float]) -> tuple[float, float]:
        """The rounds' mean and their spread (largest over smallest, less one)."""
        values = [read(p) for p in self.rounds]
        return sum(values) / len(values), max(values) / max(min(values), 1e-9) - 1

    def predicted(self, read: Callable[[LoadPoint], float]) -> float:
        return sum(read(p) for p in self.predictions) / len(self.predictions)

    def errors(self, read: Callable[[LoadPoint], float], crossed: bool = False) -> list[float]:
        """Per round: prediction over measurement, less one."""
        predictions = self.crossed if crossed else self.predictions
        return [read(p) / read(m) - 1 for p, m in zip(predictions, self.rounds, strict=True)]

    def error(self, read: Callable[[LoadPoint], float], crossed: bool = False) -> float:
        """The rounds' mean error (signed)."""
        errors = self.errors(read, crossed)
        return sum(errors) / len(errors)

    def abs_error(self, read: Callable[[LoadPoint], float], crossed: bool = False) -> float:
        errors = self.errors(read, crossed)
        return sum(abs(e) for e in errors) / len(errors)

    @property
    def saturated(self) -> bool:
        return any(p.generator_saturated for p in self.rounds)


def _rate(point: LoadPoint) -> float:
    return point.achieved_rps


def _p99(point: LoadPoint) -> float:
    return point.latency.p99


def _batch(point: LoadPoint) -> float:
    return point.mean_batch


def _host_note(rounds: list[LoadPoint]) -> str:
    """The hypervisor's steal in each round, where the point recorded it."""
    steal = [p.server_metrics.get("host_steal_fraction") for p in rounds]
    if any(s is None for s in steal):
        return ""
    return "  steal " + "/".join(f"{s:.0%}" for s in steal)


def _print_row(judged: Judged) -> None:
    rate, rate_spread = judged.measured(_rate)
    p99, p99_spread = judged.measured(_p99)
    batch = sum(p.mean_batch for p in judged.rounds) / len(judged.rounds)
    first = judged.rounds[0]
    print(
        f"{judged.model:<12} {first.policy.label:<44} {judged.label.rsplit(', ', 1)[1]:<13} "
        f"{rate:>7.0f} {rate_spread:>5.0%} {judged.predicted(_rate):>7.0f} "
        f"{judged.error(_rate):>+6.0%}  {p99:>7.2f} {p99_spread:>5.0%} "
        f"{judged.predicted(_p99):>7.2f} {judged.error(_p99):>+6.0%}  "
        f"{batch:>5.1f} {judged.predicted(_batch):>5.1f}"
        + _host_note(judged.rounds)
        + ("  (client saturated)" if judged.saturated else "")
        + ("  (cost-measurement load)" if _is_cost_load(first) else "")
    )


def _collect(names: list[str], duration: float, repeat: int) -> dict[str, Any]:
    """Per model and round: a cost measurement, then every policy's points right after it."""
    collected: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            build, dims = MODELS[name]
            path = models.save(build(), Path(folder) / f"{name}.onnx")
            rounds = []
            for _ in range(repeat):
                costs = measure_costs_on_server(
                    path,
                    dims=dims,
                    two_instances=True,
                    intra_op_threads=THREADS,
                    delay_probe_us=PROBE_DELAY_US,
                )
                points = [
                    p.to_dict()
                    for policy in POLICIES
                    for p in _measure_policy(path, policy, dims, duration)
                ]
                # "calibration": the key files saved before keep
                rounds.append({"calibration": costs.to_dict(), "points": points})
            collected[name] = {"rounds": rounds}
            print(f"{name}: measured {repeat} round(s)", flush=True)
    return collected


def _judge(collected: dict[str, Any]) -> list[Judged]:
    """Every point predicted from each round's cost measurement (re-derived from the stored
    samples, so a changed `costs_from_samples` is judged on the same measurements)."""
    judged = []
    for name, data in collected.items():
        curves = [CostMeasurement.from_dict(r["calibration"]).recomputed() for r in data["rounds"]]
        for index, curve in enumerate(curves, start=1):
            print(f"{name} (round {index}): {curve.summary}")
        rounds = [[LoadPoint.from_dict(p) for p in r["points"]] for r in data["rounds"]]
        for same in zip(*rounds, strict=True):
            own = [_predict(c, p) for c, p in zip(curves, same, strict=True)]
            other = curves[1:] + curves[:1]  # the next round's cost measurement (itself with one)
            crossed = [_predict(c, p) for c, p in zip(other, same, strict=True)]
            judged.append(Judged(name, list(same), own, crossed))
    return judged


def _report(judged: list[Judged]) -> None:
    header = (
        f"{'model':<12} {'policy':<44} {'load':<13} {'meas/s':>7} {'sprd':>5} {'pred/s':>7} "
        f"{'err':>6}  {'meas p99':>7} {'sprd':>5} {'pred p99':>7} {'err':>6}  "
        f"{'meas b':>5} {'pred b':>5}"
    )
    print(header)
    for row in judged:
        _print_row(row)
    scored = [j for j in judged if not j.saturated and not _is_cost_load(j.rounds[0])]
    if not scored:
        return
    errors = [(j.abs_error(_rate), j.abs_error(_p99)) for j in scored]
    within = sum(r <= THROUGHPUT_GOAL and p <= P99_GOAL for r, p in errors)
    print(
        f"\n{within}/{len(scored)} points within {THROUGHPUT_GOAL:.0%} throughput and "
        f"{P99_GOAL:.0%} p99 (mean over the rounds of |error| against the same round)"
    )
    mean_rate = sum(r for r, _ in errors) / len(errors)
    mean_p99 = sum(p for _, p in errors) / len(errors)
    print(f"mean |error|: throughput {mean_rate:.0%}, p99 {mean_p99:.0%}")
    rounds = len(scored[0].rounds)
    if rounds > 1:  # how far the measurement itself moves between rounds minutes apart
        spreads = [(j.measured(_rate)[1], j.measured(_p99)[1]) for j in scored]
        print(
            f"the measurement's own spread over {rounds} rounds (largest over smallest): "
            f"throughput mean {sum(r for r, _ in spreads) / len(spreads):.0%}, "
            f"p99 mean {sum(p for _, p in spreads) / len(spreads):.0%}"
        )
        crossed = [(j.abs_error(_rate, True), j.abs_error(_p99, True)) for j in scored]
        print(
            "predicted from the other round's cost measurement instead (the host's drift between "
            f"cost measurement and points): mean |error| throughput "
            f"{sum(r for r, _ in crossed) / len(crossed):.0%}, p99 "
            f"{sum(p for _, p in crossed) / len(crossed):.0%}"
        )
        inside = sum(
            r <= max(THROUGHPUT_GOAL, sr) and p <= max(P99_GOAL, sp)
            for (r, p), (sr, sp) in zip(errors, spreads, strict=True)
        )
        print(f"within the goal or within the measurement's own spread: {inside}/{len(scored)}")
    batches = [j.predicted(_batch) / max(j.measured(_batch)[0], 1e-9) for j in scored]
    print(
        f"throughput alone within {THROUGHPUT_GOAL:.0%}: "
        f"{sum(r <= THROUGHPUT_GOAL for r, _ in errors)}/{len(errors)}; mean batch within half "
        f"to twice the measured: {sum(0.5 <= b <= 2.0 for b in batches)}/{len(batches)}"
    )
    for j, (r, p) in zip(scored, errors, strict=True):
        if r > THROUGHPUT_GOAL or p > P99_GOAL:
            print(
                f"outside the goal: {j.label}: throughput "
                + "/".join(f"{e:+.0%}" for e in j.errors(_rate))
                + ", p99 "
                + "/".join(f"{e:+.0%}" for e in j.errors(_p99))
                + " (per round)"
            )
    for j in judged:
        if j.saturated:
            print(
                "left out (the load generator could not keep up, so not the server's "
                f"numbers): {j.label}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per load point")
    parser.add_argument(
        "--models", default=",".join(MODELS), help="comma list of " + ", ".join(MODELS)
    )
    parser.add_argument("--repeat", type=int, default=2, help="rounds of every load point")
    parser.add_argument("--save", type=Path, help="write the measurements to this JSON file")
    parser.add_argument(
        "--replay", type=Path, help="judge the measurements a --save wrote instead of measuring"
    )
    args = parser.parse_args()

    curve_for_ranking = LatencyCurve((1, 4, 16), (1.0, 1.6, 4.0), 0.3, 0.05, (1.0, 1.8))
    started = time.perf_counter()
    grid = policy_grid(
        instance_counts=(1, 2, 3, 4), delays_us=(0, 200, 500, 1000, 2000, 3000, 4000)
    )
    rank_policies(curve_for_ranking, LoadSpec(Scenario.SERVER, target_rps=500), grid, 10.0)
    print(f"ranking {len(grid)} policies: {time.perf_counter() - started:.2f} s\n")
    if args.replay:
        collected = json.loads(args.replay.read_text())
    else:
        collected = _collect(args.models.split(","), args.duration, max(1, args.repeat))
        if args.save:
            args.save.write_text(json.dumps(collected))
    _report(_judge(collected))
    return 0


if __name__ == "__main__":
    sys.exit(main())
