"""What a configuration asks Ray for, and how a node of a target is started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backend.cluster.targets import MEASURE_SLOT, ask_for, join_command
from backend.errors import UserError
from backend.specs import Configuration

ROOT = Path(__file__).resolve().parents[3]


def test_a_cpu_measurement_owns_the_node_and_gpu_measurements_share_it_only_with_each_other() -> (
    None
):
    cpu = ask_for(Configuration(precision="fp32", provider="cpu", target="xeon"))
    gpu = ask_for(Configuration(precision="fp32", provider="cuda", target="a100"))
    assert cpu.num_gpus == 0 and cpu.resources == {MEASURE_SLOT: 1.0, "target:xeon": 0.001}
    assert gpu.num_gpus == 1 and gpu.resources["target:a100"] == 0.001
    # a GPU measurement takes a share of the slot: a CPU one (all of it) cannot start beside it
    assert 0 < gpu.resources[MEASURE_SLOT] and cpu.resources[MEASURE_SLOT] + 0.001 > 1
    replica = ask_for(Configuration(precision="fp32", replicas=4))
    assert replica.resources == {MEASURE_SLOT: 0.25} and replica.bundle() == {MEASURE_SLOT: 0.25}


def test_join_starts_ray_with_the_target_and_one_measurement_slot() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "backend.cluster", "join", "--address", "head:6379"]
        + ["--target", "t4", "--num-gpus", "2", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split()[:3] == ["ray", "start", "--address=head:6379"]
    command = join_command("head:6379", "t4", 2)
    resources = json.loads(command[3].removeprefix("--resources="))
    assert resources == {"target:t4": 1.0, MEASURE_SLOT: 1.0} and command[4] == "--num-gpus=2"


def test_a_target_name_that_is_not_a_plain_word_is_refused() -> None:
    with pytest.raises(UserError, match="not valid"):
        Configuration(precision="fp32", target='t4", "CPU": 99')
    with pytest.raises(UserError, match="Replicas must be between 1 and 64"):
        Configuration(precision="fp32", replicas=0)
