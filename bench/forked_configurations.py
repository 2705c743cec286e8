"""What a configuration costs in a fresh sandboxed child and in a fork of the job's fork server.

Each round measures the same two configurations of the test MLP (FP32 and static INT8, the quick
preset) both ways, in alternating order, so machine noise hits both alike:
- cold: measure_in_child without a fork server, a fresh `python -m backend.launch.children` in
  bubblewrap per configuration (how every configuration ran before backend/launch/forks.py);
- forked: measure_in_child with one Forks(MEASURE_PRELOAD) kept across the rounds, as a job keeps
  one across its configurations (its server's start is timed apart, once).
CPU is the machine's busy time from /proc/stat around each call (a sandboxed child's CPU never
reaches RUSAGE_CHILDREN), so run it on an otherwise idle host. It prints each side's median wall
and CPU seconds, the ratios, and checks each forked result against the cold one (status, outputs'
largest error, providers), so the faster side is not doing less.
Run: .venv/bin/python bench/forked_configurations.py [rounds]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.engine.run import ConfigurationTask  # noqa: E402
from backend.jobs.measuring import MEASURE_PRELOAD, measure_in_child  # noqa: E402
from backend.launch.forks import Forks  # noqa: E402
from backend.results import ConfigurationResult  # noqa: E402
from backend.specs import MEASURE_PRESETS, SweepSpec  # noqa: E402
from tests import models  # noqa: E402

TICKS = 100  # /proc/stat's USER_HZ


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (user, nice, system, irq, softirq, steal)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:3]) + sum(fields[5:8])) / TICKS


def timed(run: Callable[[], ConfigurationResult | None]) -> tuple[float, float, Any]:
    busy, started = busy_seconds(), time.perf_counter()
    result = run()
    return time.perf_counter() - started, busy_seconds() - busy, result


def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        source = models.save(models.make_mlp(), Path(scratch) / "mlp.onnx")
        spec = SweepSpec(precisions=("fp32", "int8_static"), providers=("cpu",), batch_sizes=(1,))
        tasks = [
            ConfigurationTask(str(source), config, MEASURE_PRESETS["quick"], f"{scratch}/out")
            for config in spec.configurations()
        ]
        walls: dict[str, list[float]] = {"cold": [], "forked": []}
        cpus: dict[str, list[float]] = {"cold": [], "forked": []}
        with Forks(MEASURE_PRELOAD) as forks:
            start_wall, start_cpu, _ = timed(lambda: measure_in_child(tasks[0], 120, forks=forks))
            for index in range(rounds):
                order = ("cold", "forked") if index % 2 == 0 else ("forked", "cold")
                for task in tasks:
                    results = {}
                    for side in order:
                        held = forks if side == "forked" else None
                        wall, cpu, result = timed(
                            lambda t=task, f=held: measure_in_child(t, 120, forks=f)
                        )
                        walls[side].append(wall)
                        cpus[side].append(cpu)
                        results[side] = result
                    check(results["cold"], results["forked"])
            started = forks.started
    print(f"{rounds} rounds x {len(tasks)} configurations (FP32, static INT8) of the test MLP")
    print(
        f"fork server started {started} time(s); its first call took {start_wall:.2f} s wall, "
        f"{start_cpu:.2f} CPU-s"
    )
    for side in ("cold", "forked"):
        print(
            f"{side:>7}: median {statistics.median(walls[side]):.3f} s wall, "
            f"{statistics.median(cpus[side]):.3f} CPU-s per configuration"
        )
    wall_ratio = statistics.median(walls["forked"]) / statistics.median(walls["cold"])
    cpu_ratio = statistics.median(cpus["forked"]) / statistics.median(cpus["cold"])
    print(f"forked / cold: wall {wall_ratio:.2f}, CPU {cpu_ratio:.2f}")


def check(cold: ConfigurationResult | None, forked: ConfigurationResult | None) -> None:
    """Both measured, with the same outputs and providers: otherwise the timing means nothing."""
    assert cold is not None and forked is not None
    assert cold.ok and forked.ok, (cold.error, forked.error)
    assert cold.accuracy is not None and forked.accuracy is not None
    assert forked.accuracy.max_abs_error == cold.accuracy.max_abs_error
    assert forked.providers_used == cold.providers_used


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
