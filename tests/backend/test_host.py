"""Host contention: the CPU other processes and the hypervisor took while something was measured."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from backend.engine.run import ConfigurationTask, run_configuration
from backend.host import HostWatch, contention_note
from backend.specs import MEASURE_PRESETS, Configuration, Precision
from tests.models import make_mlp, save

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"


def _spinners(count: int) -> list[subprocess.Popen]:
    """Processes that each keep one core busy: someone else's work on this machine."""
    return [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]


def _stop(spinners: list[subprocess.Popen]) -> None:
    for process in spinners:
        process.kill()
        process.wait()


def test_a_watch_sees_another_process_busy_and_not_this_one() -> None:
    spinners = _spinners(1)
    try:
        time.sleep(0.2)  # the spinner is running
        with HostWatch() as watch:
            time.sleep(1.0)  # this process idles
    finally:
        _stop(spinners)
    share = watch.share
    assert share is not None and share.seconds >= 1.0
    assert share.own_cores < 0.1  # asleep
    assert share.other_cores >= 0.3, share  # the spinner had a core, or most of one
    assert share.busy_cores >= share.other_cores and 0.0 <= share.steal_fraction < 1.0


def test_the_note_states_others_and_steal_only_past_their_thresholds() -> None:
    assert contention_note({"host_other_cores": 0.2, "host_steal_fraction": 0.01}) is None
    assert contention_note({}) is None
    both = contention_note({"host_other_cores": 0.94, "host_steal_fraction": 0.071})
    assert both == (
        f"While this was measured other processes kept 0.9 of {os.cpu_count()} cores busy and "
        "the hypervisor took 7% of the CPU time (steal); a rerun may differ."
    )


def test_a_configuration_measured_beside_busy_processes_says_so(tmp_path: Path) -> None:
    model = save(make_mlp(), tmp_path / "mlp.onnx")
    task = ConfigurationTask(
        str(model),
        Configuration(precision=Precision.FP32, intra_op_threads=1),
        MEASURE_PRESETS["quick"],
        str(tmp_path),
    )
    spinners = _spinners(os.cpu_count() or 1)  # every core has someone else's work
    try:
        result = run_configuration(task)
    finally:
        _stop(spinners)
    assert result.ok, result.error
    others = result.telemetry["host_other_cores"]
    assert others >= 0.5, result.telemetry
    assert any(n.startswith("While this was measured other processes kept") for n in result.notes)
