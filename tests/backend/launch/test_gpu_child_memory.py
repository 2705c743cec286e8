"""GPU children are limited on resident memory (a memory cgroup), not address space: the CUDA
driver maps tens of GB it never touches, which RLIMIT_AS counted (an FP32 ResNet-50 at batch 1024
with 3.5 GB resident was refused at 64 GB on an H200). Real children, real cgroups."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from backend.launch import pids
from backend.launch.children import run_in_child
from backend.launch.limits import ChildLimits


def _map_untouched(gigabytes: int) -> int:
    """Map `gigabytes` of zero pages and touch none of them (calloc: mmap, lazily backed)."""
    return int(np.zeros(gigabytes << 30, dtype=np.uint8).nbytes)


def _touch(megabytes: int) -> int:
    return int(np.ones(megabytes << 20, dtype=np.uint8).sum())


def test_untouched_address_space_passes_a_gpu_child_but_not_a_cpu_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPTIBOARD_CHILD_MEMORY_MB", "1024")

    gpu = run_in_child(
        _map_untouched,
        2,
        timeout_s=60,
        what="The configuration",
        limits=ChildLimits.from_settings(gpu=True),
    )
    cpu = run_in_child(_map_untouched, 2, timeout_s=60, what="The configuration")

    assert gpu.ok and gpu.value == 2 << 30, gpu.error
    assert not cpu.ok and cpu.limit == "memory"
    assert cpu.error is not None and "memory limit of 1024 MB" in cpu.error


def test_a_gpu_child_that_touches_more_than_its_memory_is_killed_and_told_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the service may write the memory cgroup hierarchy (root here, as for the pids one)."""
    writable = os.access("/sys/fs/cgroup/memory", os.W_OK) or os.access("/sys/fs/cgroup", os.W_OK)
    if not pids.memory_available():
        assert not (os.getuid() == 0 and writable), (
            "root with a writable cgroup fs, no memory cgroup"
        )
        pytest.skip("no memory cgroup can be made here")
    monkeypatch.setenv("OPTIBOARD_CHILD_MEMORY_MB", "256")

    outcome = run_in_child(
        _touch,
        1024,
        timeout_s=60,
        what="The configuration",
        limits=ChildLimits.from_settings(gpu=True),
    )

    assert not outcome.ok and outcome.limit == "memory", outcome.error
    assert outcome.error == (
        "The configuration ran out of its resident-memory limit of 256 MB "
        "(OPTIBOARD_CHILD_MEMORY_MB); use a smaller model, batch or input size, or raise the limit."
    )
    assert not outcome.notes  # it was limited, so nothing says "unlimited"
    memory_parent = pids._memory_parent()
    assert memory_parent is not None
    assert not [p for p in memory_parent.glob(f"child-{os.getpid()}-*") if p.is_dir()]


def test_without_a_memory_cgroup_a_gpu_child_is_unlimited_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A host whose cgroup fs the service cannot write: no memory cgroup, and no RLIMIT_AS."""
    pids._parent()  # the pids cgroup stays as it is; only the memory one is out of reach
    monkeypatch.setattr(pids, "V1_MEMORY", tmp_path / "no-memory-hierarchy")
    monkeypatch.setattr(pids, "V2_ROOT", tmp_path / "no-cgroup2")
    pids._memory_parent.cache_clear()
    monkeypatch.setenv("OPTIBOARD_CHILD_MEMORY_MB", "1024")
    try:
        outcome = run_in_child(
            _map_untouched,
            2,
            timeout_s=60,
            what="The configuration",
            limits=ChildLimits.from_settings(gpu=True),
        )
    finally:
        pids._memory_parent.cache_clear()

    assert outcome.ok, outcome.error
    assert len(outcome.notes) == 1 and "unlimited host memory" in outcome.notes[0]
    assert "no memory cgroup could be made here" in outcome.notes[0]
