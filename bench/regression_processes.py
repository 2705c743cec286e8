"""A/A regression checks measured in one process a side against several: how often the 95%
interval leaves out 1, and how often the verdict says slower or faster, when nothing changed.

Section 1 is arithmetic on synthetic samples through the check's own statistics
(backend/reporting/regression.py process_ratio and verdict): each process of each side gets its
own offset, normal with the given spread (1.2% a side: the colleague's 19 real A/A checks on this
host, B/A sd 1.7%; 1.8%: a loaded CI host, where one offset reached 5.2%), and 300 tight calls
(1% spread). Section 2 is real: the tests' MLP (about 6 us a call, the model of the CI 'faster')
on default against default through the kind's code (run_pair and compare_sides: sandboxed dialog
children, timed interleaved), `--repeats` times with 1 process a side and as many with 3, the two
alternating so a busy spell of the host falls on both.

    .venv/bin/python bench/regression_processes.py [--trials 1000] [--repeats 10]
        [--max-seconds 2]    (--repeats 0: section 1 only)

Prints everything; the recorded run is in bench/results/regression_processes.txt.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.jobs.regression import compare_sides, run_pair  # noqa: E402
from backend.jobs.regressspec import RegressionSpec  # noqa: E402
from backend.reporting import regression as stats  # noqa: E402
from backend.specs import MEASURE_PRESETS  # noqa: E402
from tests import models  # noqa: E402


def synthetic(trials: int) -> None:
    """Section 1: A/A checks on synthetic processes, through process_ratio and verdict. Each
    pair k also gets a drift both its processes share (the host busier during that pair)."""
    print(f"1. Synthetic A/A checks, {trials} a row: 300 calls a process (1% spread)\n")
    print("spread a side  drift a pair  pairs  interval leaves out 1  slower/faster at 5%  at 3%")
    rng = np.random.default_rng(2026)
    for spread in (0.012, 0.018):
        for drift in (0.0, 0.05):
            for k in (1, 2, 3, 5):
                out = five = three = 0
                for trial in range(trials):
                    shared = 1 + rng.normal(0, drift, k)
                    a, b = (
                        [
                            shared[j]
                            * (1 + rng.normal(0, spread))
                            * (1 + np.abs(rng.normal(0, 0.01, 300)))
                            for j in range(k)
                        ]
                        for _ in "ab"
                    )
                    iv = stats.process_ratio(a, b, seed=trial, asked=k)
                    out += not iv.low <= 1 <= iv.high
                    five += stats.verdict(iv, 0.05) != stats.SAME
                    three += stats.verdict(iv, 0.03) != stats.SAME
                print(
                    f"{spread:>12.1%}  {drift:>12.0%}  {k:>5}  {out / trials:>21.1%}  "
                    f"{five / trials:>19.1%}  {three / trials:>5.1%}"
                )


def real(repeats: int, max_seconds: float, folder: Path) -> None:
    """Section 2: the MLP on default against default, 1 and 3 processes a side, alternating."""
    print(
        f"\n2. Real A/A checks: the MLP, default against default, time cap {max_seconds:g} s a "
        f"side, {repeats} checks with 1 process a side and {repeats} with 3, alternating\n"
    )
    mlp = models.save(models.make_mlp(), folder / "mlp.onnx")
    measure = replace(MEASURE_PRESETS["quick"], max_seconds=max_seconds)
    base = RegressionSpec(env_b="default", measure=measure, profile=False)
    said: dict[int, list[dict]] = {1: [], 3: []}
    print("processes  B/A    95% interval     verdict  wall    A p50 us by process | B's")
    for i in range(repeats):
        for k in (1, 3):
            spec = replace(base, processes=k)
            started = time.monotonic()
            run = run_pair(
                spec, spec.configurations()[0], {"a": mlp, "b": mlp}, folder / f"{i}-{k}"
            )
            report = compare_sides(spec, run)
            iv = report["interval"]
            per = {
                s: "/".join(f"{m * 1000:.3f}" for m in iv[f"process_medians_{s}_ms"]) for s in "ab"
            }
            print(
                f"{k:>9}  {iv['ratio']:.3f}  [{iv['low']:.3f}, {iv['high']:.3f}]  "
                f"{report['verdict']:<7}  {time.monotonic() - started:4.1f} s  "
                f"{per['a']} | {per['b']}",
                flush=True,
            )
            said[k].append(iv | {"verdict": report["verdict"]})
    print()
    for k, ivs in said.items():
        ratios = np.array([iv["ratio"] for iv in ivs])
        out = sum(not iv["low"] <= 1 <= iv["high"] for iv in ivs)
        same = sum(iv["verdict"] == stats.SAME for iv in ivs)
        print(
            f"{k} process(es) a side: B/A {ratios.min():.3f}-{ratios.max():.3f} (sd "
            f"{ratios.std(ddof=1):.1%}), interval left out 1 in {out} of {len(ivs)}, "
            f"'same' in {same} of {len(ivs)}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000, help="synthetic checks a row")
    parser.add_argument("--repeats", type=int, default=10, help="real A/A checks a kind (0: none)")
    parser.add_argument("--max-seconds", type=float, default=2.0)
    args = parser.parse_args()
    started = time.monotonic()
    with open("/proc/loadavg") as handle:
        load = " ".join(handle.read().split()[:3])
    print(f"host: {os.cpu_count()} cores, load average at start {load} (shared with others)\n")
    synthetic(args.trials)
    if args.repeats:
        with tempfile.TemporaryDirectory(prefix="optiboard-bench-procs-") as tmp:
            real(args.repeats, args.max_seconds, Path(tmp))
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
