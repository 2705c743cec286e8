"""Real resource limits hit in real children; each fails alone with a sentence naming its limit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from backend.engine.run import ConfigurationTask, run_configuration
from backend.errors import UserError
from backend.launch import pids
from backend.launch.children import run_call, run_in_child
from backend.specs import MEASURE_PRESETS, Configuration
from tests import models
from tests.backend.launch import probes
from tests.backend.launch.sandboxed import in_sandbox
from tests.processes import alive
from tests.rss import MB, rss_bytes


def _allocate(gigabytes: int) -> int:
    return int(np.ones(gigabytes << 30, dtype=np.uint8).sum())


def _spin() -> None:
    while True:
        pass


def _write(path: str, megabytes: int) -> None:
    with open(path, "wb") as handle:
        for _ in range(megabytes):
            handle.write(b"\0" * MB)


def _task(model: Path, tmp_path: Path, **config: object) -> ConfigurationTask:
    configuration = Configuration(precision="fp32", **config)  # type: ignore[arg-type]
    return ConfigurationTask(
        source_path=str(model),
        configuration=configuration,
        measure=MEASURE_PRESETS["quick"],
        output_dir=str(tmp_path / "out"),
    )


def test_memory_limit_stops_an_allocation_with_a_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIBOARD_CHILD_MEMORY_MB", "1024")
    before = rss_bytes()

    outcome = run_in_child(_allocate, 4, timeout_s=60, what="The configuration")

    assert not outcome.ok and outcome.limit == "memory"
    assert outcome.error == (
        "The configuration ran out of its memory limit of 1024 MB (OPTIBOARD_CHILD_MEMORY_MB); "
        "use a smaller model, batch or input size, or raise the limit."
    )
    assert rss_bytes() - before < 100 * MB


def test_constant_of_shape_bomb_fails_its_configuration_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPTIBOARD_CHILD_MEMORY_MB", "3072")
    bomb = models.save(models.make_constant_of_shape_bomb(), tmp_path / "bomb.onnx")
    assert bomb.stat().st_size < 300
    before = rss_bytes()

    outcome = run_in_child(run_configuration, _task(bomb, tmp_path), timeout_s=120)

    assert not outcome.ok and outcome.limit == "memory", outcome.error
    assert "memory limit of 3072 MB (OPTIBOARD_CHILD_MEMORY_MB)" in (outcome.error or "")
    assert rss_bytes() - before < 100 * MB


def test_huge_symbolic_dimension_is_refused_before_any_input_is_allocated(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPTIBOARD_CHILD_MEMORY_MB", "3072")
    model = models.save(models.make_symbolic_dim_model(), tmp_path / "symbolic.onnx")
    task = _task(model, tmp_path, symbolic_dims=(("seq", 10**9),))
    before = rss_bytes()

    outcome = run_in_child(run_configuration, task, timeout_s=120)

    assert outcome.ok, outcome.error
    assert outcome.value.status == "failed"
    assert outcome.value.error == (
        "Input 'x' at shape [1, 1000000000] takes 3,815 MB, over the input limit of 2048 MB "
        "(OPTIBOARD_MAX_INPUT_MB); use a smaller batch size or smaller values for the symbolic "
        "dimensions."
    )
    assert rss_bytes() - before < 100 * MB


def test_cpu_time_limit_stops_a_busy_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIBOARD_CHILD_CPU_S", "1")

    outcome = run_in_child(_spin, timeout_s=60, what="The configuration")

    assert outcome.limit == "cpu" and outcome.exitcode == -signal.SIGXCPU
    assert outcome.error is not None
    assert outcome.error.startswith("The configuration used up its CPU-time limit of 1 s")


def test_file_size_limit_stops_a_large_write(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPTIBOARD_CHILD_FILE_MB", "2")
    target = tmp_path / "big.bin"

    outcome = run_in_child(_write, str(target), 5, timeout_s=60, what="The configuration")

    assert outcome.limit == "file"
    assert "over the size limit of 2 MB (OPTIBOARD_CHILD_FILE_MB)" in (outcome.error or "")
    assert target.stat().st_size == 2 * MB


PARENT = """
import sys, time
from backend.errors import UserError
from backend.launch import pids
from backend.launch.children import run_call, run_in_child
from tests.backend.launch.test_limits import _report_pid_and_sleep
run_in_child(_report_pid_and_sleep, sys.argv[1], timeout_s=600)
"""


def _report_pid_and_sleep(path: str) -> None:
    Path(path).write_text(str(os.getpid()))
    time.sleep(600)


def test_child_dies_with_a_sigkilled_parent(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pid_file)], cwd=root, env=env)
    try:
        for _ in range(300):
            if pid_file.is_file() and pid_file.read_text():
                break
            time.sleep(0.1)
        child = int(pid_file.read_text())
        assert alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        for _ in range(100):
            if not alive(child):
                break
            time.sleep(0.1)
        assert not alive(child)
    finally:
        parent.kill()
        parent.wait()


def _children_left() -> list[int]:
    """Processes still alive that this test process started through the launcher: their command
    lines name a child folder carrying this process's pid (forked copies included)."""
    marker = f"optiboard-child-{os.getpid()}-".encode()
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


PROCS_SENTENCE = (
    "{what} tried to start more than 40 processes and threads (OPTIBOARD_CHILD_PROCS); use a "
    "model or runtime setting with fewer threads, or raise the limit."
)


def test_fork_bomb_is_stopped_by_the_process_limit_even_as_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tests run as root, which RLIMIT_NPROC exempts: the per-child pids cgroup stops it."""
    assert os.getuid() != 0 or pids.available(), "root here, and no pids cgroup could be made"
    monkeypatch.setenv("OPTIBOARD_CHILD_PROCS", "40")

    outcome = run_in_child(probes.fork_bomb, 400, timeout_s=60, what="The configuration")

    assert not outcome.ok and outcome.limit == "procs", outcome.error
    assert outcome.error == PROCS_SENTENCE.format(what="The configuration")
    # the test process is unaffected: it still starts children, and none of the bomb's are left
    assert subprocess.run(["true"], check=False).returncode == 0
    assert _children_left() == []
    assert not list(Path("/sys/fs/cgroup/pids/optiboard").glob(f"child-{os.getpid()}-*"))


def test_fork_bomb_in_the_sandbox_is_stopped_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIBOARD_CHILD_PROCS", "40")
    tests = Path(__file__).resolve().parents[2]

    with pytest.raises(UserError) as refused:
        run_call(
            "tests.backend.launch.probes:fork_bomb",
            400,
            timeout_s=60,
            what="Checking 'bomb.onnx'",
            sandboxed=True,
            read_only=[tests],
        )

    assert str(refused.value) == PROCS_SENTENCE.format(what="Checking 'bomb.onnx'")
    assert subprocess.run(["true"], check=False).returncode == 0


def test_a_root_service_that_can_make_no_pids_cgroup_says_its_children_are_uncapped() -> None:
    """The kernel does not enforce RLIMIT_NPROC for root, so a root service without a pids
    cgroup (the Docker image without cgroup access) caps nothing, and its worker says so in its
    log at start. The sandbox shows a process no cgroup hierarchy: a host like that, for real."""
    assert pids.uncapped_reason() is None  # here: root with a writable hierarchy, or not root

    seen = in_sandbox("uncapped_reason")

    if os.geteuid() == 0:
        assert seen.startswith("This service runs as root and can make no pids cgroup")
        assert "docker run --pids-limit" in seen
    else:
        assert seen is None
