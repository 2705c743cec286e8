"""Predicted vs measured serving: the batcher simulation against the real Triton server.

For each model (a tiny MLP, a small CNN, a transformer block, all from tests/models.py):
1. calibrate on the real server (serving.calibrate.calibrate_on_server): the latency-vs-batch
   curve, one request in flight (per-request instance work, the way in and out), four in flight
   (the generator's CPU per request, how much the generator and the server slow each other),
   two instances at four in flight (how two executions slow each other) and a 1000 us queue
   delay at one in flight (how late Triton's batcher sends a held batch). None of these load
   points is judged below (the judged delay is 2000 us);
2. for several policies and loads, measure LoadPoints on the real server and predict the same
   points with the simulation; print throughput, p99 and mean batch of both, and the error.
Goal: within 10% on throughput and 20% on p99; every point outside is listed at the end.
Points where the load generator fell behind are shown but not scored (not the server's numbers).
Also prints how long ranking 300 policies takes. Takes a few minutes; run it once.

    .venv/bin/python bench/serving_prediction.py [--duration 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backend.serving.calibrate import calibrate_on_server  # noqa: E402
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
# One ONNX Runtime thread per instance, in calibration and measurement alike: an idle intra-op
# pool spins, and that CPU would read as per-request work in the host's budget.
THREADS = 1
CALIBRATION_POLICY = BatchingPolicy(max_batch_size=16)  # what calibrate_on_server serves
PROBE_DELAY_US = 1000  # the calibration's queue delay: not the 2000 us judged below
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


def _is_calibration_load(point: LoadPoint) -> bool:
    """The one-in-flight point of the calibration's own policy: its p50 set the way in and out."""
    return (
        point.policy == CALIBRATION_POLICY
        and point.spec.scenario is Scenario.CONCURRENCY
        and point.spec.concurrency == 1
    )


def _row(model: str, measured: LoadPoint, predicted: LoadPoint) -> tuple[str, float, float]:
    spec = measured.spec
    load = (
        f"{spec.concurrency} in flight"
        if spec.scenario is Scenario.CONCURRENCY
        else (f"{spec.target_rps:g} req/s")
    )
    rate_error = predicted.achieved_rps / measured.achieved_rps - 1
    p99_error = predicted.latency.p99 / measured.latency.p99 - 1
    print(
        f"{model:<12} {measured.policy.label:<48} {load:<14} "
        f"{measured.achieved_rps:>8.0f} {predicted.achieved_rps:>8.0f} {rate_error:>+7.0%}  "
        f"{measured.latency.p99:>7.2f} {predicted.latency.p99:>7.2f} {p99_error:>+7.0%}  "
        f"{measured.mean_batch:>5.1f} {predicted.mean_batch:>5.1f}"
        + ("  (client saturated)" if measured.generator_saturated else "")
        + ("  (calibration load)" if _is_calibration_load(measured) else "")
    )
    return f"{model}, {measured.policy.label}, {load}", rate_error, p99_error


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per load point")
    parser.add_argument(
        "--models", default=",".join(MODELS), help="comma list of " + ", ".join(MODELS)
    )
    args = parser.parse_args()

    curve_for_ranking = LatencyCurve((1, 4, 16), (1.0, 1.6, 4.0), 0.3, 0.05, (1.0, 1.8))
    started = time.perf_counter()
    grid = policy_grid(
        instance_counts=(1, 2, 3, 4), delays_us=(0, 200, 500, 1000, 2000, 3000, 4000)
    )
    rank_policies(curve_for_ranking, LoadSpec(Scenario.SERVER, target_rps=500), grid, 10.0)
    print(f"ranking {len(grid)} policies: {time.perf_counter() - started:.2f} s\n")

    header = (
        f"{'model':<12} {'policy':<48} {'load':<14} {'meas/s':>8} {'pred/s':>8} {'err':>7}  "
        f"{'meas p99':>7} {'pred p99':>7} {'err':>7}  {'meas b':>5} {'pred b':>5}"
    )
    misses: list[str] = []
    errors: list[tuple[float, float]] = []
    saturated: list[str] = []
    batches: list[float] = []  # predicted over measured mean batch, per scored point
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models.split(","):
            build, dims = MODELS[name]
            path = models.save(build(), Path(folder) / f"{name}.onnx")
            calibration = calibrate_on_server(
                path,
                dims=dims,
                two_instances=True,
                intra_op_threads=THREADS,
                delay_probe_us=PROBE_DELAY_US,
            )
            curve = calibration.curve
            print(
                f"{name}: compute ms per batch "
                + ", ".join(
                    f"{b}:{ms:.2f}"
                    for b, ms in zip(curve.batch_sizes, curve.compute_ms, strict=True)
                )
                + f"; per request on the instance {curve.response_cost_ms:.2f} ms; way in and "
                f"out {curve.overhead_ms:.2f} ms (spread {curve.overhead_jitter:.2f}); "
                f"generator {curve.request_cost_ms:.2f} ms CPU per request; generator and "
                f"server slow each other x{curve.host_slowdown:.2f}; two instances "
                f"x{curve.slowdown_at(2):.2f}; host {curve.host_cpu_ms:.2f} ms CPU per request "
                f"outside executions on {curve.host_cores:.2f} cores; held batches leave "
                f"{curve.delay_overshoot_ms:.2f} ms late and come back {curve.held_wake_ms:.2f} "
                "ms later"
            )
            print(header)
            for policy in POLICIES:
                for point in _measure_policy(path, policy, dims, args.duration):
                    predicted = simulate(curve, point.spec, point.policy)
                    label, rate_error, p99_error = _row(name, point, predicted)
                    if point.generator_saturated:  # the client's latency, not the server's
                        saturated.append(label)
                        continue
                    if _is_calibration_load(point):
                        continue
                    errors.append((abs(rate_error), abs(p99_error)))
                    batches.append(predicted.mean_batch / point.mean_batch)
                    if abs(rate_error) > THROUGHPUT_GOAL or abs(p99_error) > P99_GOAL:
                        misses.append(
                            f"{label}: throughput {rate_error:+.0%}, p99 {p99_error:+.0%}"
                        )
            print()
    within = sum(r <= THROUGHPUT_GOAL and p <= P99_GOAL for r, p in errors)
    print(
        f"{within}/{len(errors)} points within {THROUGHPUT_GOAL:.0%} throughput and "
        f"{P99_GOAL:.0%} p99"
    )
    if errors:
        mean_rate = sum(r for r, _ in errors) / len(errors)
        mean_p99 = sum(p for _, p in errors) / len(errors)
        print(f"mean |error|: throughput {mean_rate:.0%}, p99 {mean_p99:.0%}")
        close = sum(0.5 <= b <= 2.0 for b in batches)
        within_rate = sum(r <= THROUGHPUT_GOAL for r, _ in errors)
        print(
            f"throughput alone within {THROUGHPUT_GOAL:.0%}: {within_rate}/{len(errors)}; "
            f"mean batch within half to twice the measured: {close}/{len(batches)}"
        )
    for miss in misses:
        print(f"outside the goal: {miss}")
    for label in saturated:
        print(
            f"left out (the load generator could not keep up, so not the server's numbers): {label}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
