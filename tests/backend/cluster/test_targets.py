"""What a configuration asks Ray for, and how a node of a target is started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.cluster import auth
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


def _cluster_verb(home: Path, *verb: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """`python -m backend.cluster VERB` with only `environment` of Ray's token settings, and
    `home` as HOME."""
    ours = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return subprocess.run(
        [sys.executable, "-m", "backend.cluster", *verb],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**ours, "HOME": str(home), **environment},
    )


def _join_dry_run(home: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    join = ["join", "--address", "head:6379", "--target", "t4", "--num-gpus", "2", "--dry-run"]
    return _cluster_verb(home, *join, **environment)


def test_join_starts_ray_with_the_target_and_one_measurement_slot(tmp_path: Path) -> None:
    done = _join_dry_run(tmp_path, RAY_AUTH_TOKEN="0" * 32)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:3] == ["ray", "start", "--address=head:6379"]
    command = join_command("head:6379", "t4", 2)
    resources = json.loads(command[3].removeprefix("--resources="))
    assert resources == {"target:t4": 1.0, MEASURE_SLOT: 1.0} and command[4] == "--num-gpus=2"


def test_join_without_the_clusters_token_is_refused_with_where_to_get_it(tmp_path: Path) -> None:
    """A node asks for Ray's token authentication unless told not to: without it anyone who
    reaches the cluster can run code on every node."""
    refused = _join_dry_run(tmp_path)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.strip() == auth.missing_token({"RAY_AUTH_MODE": "token"} | {"HOME": "/"})
    assert "~/.ray/auth_token" in refused.stderr and "RAY_AUTH_MODE=disabled" in refused.stderr

    token_file = tmp_path / ".ray" / "auth_token"  # where `ray get-auth-token --generate` puts it
    token_file.parent.mkdir()
    token_file.write_text("0" * 32)
    assert _join_dry_run(tmp_path).returncode == 0
    elsewhere = tmp_path / "token"
    elsewhere.write_text("0" * 32)
    assert _join_dry_run(tmp_path, RAY_AUTH_TOKEN_PATH=str(tmp_path / "absent")).returncode == 2
    assert _join_dry_run(tmp_path, RAY_AUTH_TOKEN_PATH=str(elsewhere)).returncode == 0
    token_file.unlink()
    assert _join_dry_run(tmp_path, RAY_AUTH_MODE="disabled").returncode == 0  # said outright
    nodes = _cluster_verb(tmp_path, "nodes", OPTIBOARD_RAY_ADDRESS="head:6379")  # no head needed
    assert (nodes.returncode, nodes.stderr) == (2, refused.stderr)


def test_a_target_name_that_is_not_a_plain_word_is_refused() -> None:
    with pytest.raises(UserError, match="not valid"):
        Configuration(precision="fp32", target='t4", "CPU": 99')
    with pytest.raises(UserError, match="Replicas must be between 1 and 64"):
        Configuration(precision="fp32", replicas=0)
