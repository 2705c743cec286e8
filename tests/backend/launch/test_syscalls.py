"""The seccomp filter of every child (backend/launch/syscalls.py): the kernel interfaces most
exploits start from are refused in a child, plain or sandboxed or a fork server's fork, and not in
the service itself."""

from __future__ import annotations

import platform
import signal
from pathlib import Path

import pytest

from backend.launch import sandbox
from backend.launch.children import run_in_child
from backend.launch.forks import Forks
from backend.launch.services import start_service, stop_service
from backend.launch.syscalls import DENIED, NO_SOCKETS, TABLES
from tests.backend.launch import probes
from tests.backend.launch.sandboxed import TESTS, in_sandbox

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the probe's syscall numbers are x86-64's"
)
PROBE = "tests.backend.launch.probes:exploit_interfaces"
EVERY_ONE_REFUSED = {name: "EPERM" for name in probes.exploit_interfaces()}


def test_the_service_itself_is_not_filtered() -> None:
    found = probes.exploit_interfaces()  # each made so that it fails harmlessly when allowed

    assert "EPERM" not in {found[name] for name in found if name != "x32 getpid"}, found


def test_a_plain_child_is_refused_every_listed_interface() -> None:
    assert set(EVERY_ONE_REFUSED) == {*DENIED, "x32 getpid"}  # the probe tries the whole list
    assert set(TABLES["x86_64"][1]) == set(TABLES["aarch64"][1]) == {*DENIED, *NO_SOCKETS}
    assert run_in_child(probes.exploit_interfaces, timeout_s=60).value == EVERY_ONE_REFUSED


def test_a_sandboxed_child_is_refused_every_listed_interface() -> None:
    found = in_sandbox("exploit_interfaces")

    assert found == EVERY_ONE_REFUSED


def test_a_fork_server_fork_is_refused_every_listed_interface() -> None:
    binds = sandbox.Binds.of(read_only=[TESTS])
    with Forks(["numpy"]) as forks:
        found = forks.call(PROBE, timeout_s=60, what="The probe", sandboxed=True, binds=binds)

    assert found.value == EVERY_ONE_REFUSED


def test_a_sandboxed_service_runs_its_program_under_the_filter(tmp_path: Path) -> None:
    """A Triton server is no Python child of ours: service_command sets the filter and execs it,
    with the signals Python ignores given back (SIGTERM stays ignored: the shell's trap)."""
    report = tmp_path / "status"
    binds = sandbox.Binds.of(writable=[tmp_path])
    shell = f"grep -E '^(Seccomp|NoNewPrivs|SigIgn):' /proc/self/status > {report}"
    service = start_service(sandbox.service_command(["/bin/sh", "-c", shell], tmp_path, binds))
    try:
        assert service.wait(timeout=60) == 0
    finally:
        stop_service(service)
    status = dict(line.split(":\t") for line in report.read_text().splitlines())

    assert (status["Seccomp"], status["NoNewPrivs"]) == ("2", "1")  # a filter, inherited by exec
    ignored = int(status["SigIgn"], 16)
    assert ignored & (1 << (signal.SIGTERM - 1))
    assert not ignored & (1 << (signal.SIGPIPE - 1)) and not ignored & (1 << (signal.SIGXFSZ - 1))
