"""The real bubblewrap sandbox: no writes outside scratch, no network, no secrets, hostile
SavedModels converted without their code reaching the host."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import settings
from backend.errors import UserError
from backend.launch import sandbox
from backend.launch.children import call_in_child, run_in_child
from backend.launch.limits import CHILD_ENVIRONMENT
from backend.models.ingest import ingest_file
from backend.models.tfconvert import convert_savedmodel
from backend.vendortelemetry import ORT_OPT_OUT, RAY_OPT_OUT
from storage.repo import models as model_store
from tests import models
from tests.backend.launch import probes
from tests.backend.launch.sandboxed import TESTS, in_sandbox


def test_the_sandbox_works_here() -> None:
    state = sandbox.available()
    assert state.ok, state.reason
    assert state.binary == "/usr/bin/bwrap"


def test_sandboxed_child_writes_only_in_its_scratch_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    project = settings.PROJECT_ROOT / "escaped.txt"

    found = in_sandbox(
        "try_writes", [str(outside), str(project), "inside.txt"], read_only=[tmp_path]
    )

    assert found == {str(outside): "OSError", str(project): "OSError", "inside.txt": "written"}
    assert not outside.exists() and not project.exists()


def test_a_sandboxed_child_holds_no_capability_to_remount_a_read_only_bind(
    tmp_path: Path,
) -> None:
    """bwrap run as root (these tests, the Docker image) keeps root's capabilities unless told
    not to; with CAP_SYS_ADMIN a child remounted its read-only bind writable and wrote through
    it to the host."""
    found = in_sandbox("remount_writable", str(tmp_path), read_only=[tmp_path])

    assert found == {"capabilities": "0000000000000000", "remounted": False, "written": False}
    assert not (tmp_path / "escaped").exists()


def test_a_sandboxed_child_cannot_write_the_hosts_kernel_settings() -> None:
    """As uid 0 a child needs no capability to write most of /proc/sys, and the write is the
    host's: printk_ratelimit set inside read 7 on the host, and core_pattern would have run a
    program as the host's root on the next crash."""
    found = in_sandbox("kernel_settings_writable")

    assert found == {"sysctl": False, "sysrq": False}


def test_a_sandboxed_child_cannot_make_a_user_namespace_of_its_own() -> None:
    """A user namespace's maker holds every capability inside it (the first step of most kernel
    exploits, such as nf_tables in a network namespace of its own); unshare(CLONE_NEWUSER)
    worked in the sandbox before --disable-userns and fails with the nesting limit now."""
    assert sandbox.forbids_user_namespaces(sandbox.available().binary)

    assert in_sandbox("own_user_namespace") == "ENOSPC"
    assert run_in_child(probes.own_user_namespace, timeout_s=60).value == "made"  # the probe works


def test_sandboxed_child_sees_no_secrets_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPTIBOARD_DATABASE_URL", "postgresql+psycopg://admin:hunter2@db/prod")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")

    seen = in_sandbox("environment")

    assert isinstance(seen, dict)
    assert "hunter2" not in repr(seen)
    passed = {"PATH", "HOME", "TMPDIR", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"}
    passed |= {"LOGNAME", "USER"}  # a fixed name for getpass.getuser(), not the host's
    assert (seen.get("USER"), seen.get("LOGNAME")) == ("optiboard", "optiboard")
    passed |= {setting.name for setting in sandbox.PASSED_SETTINGS}  # parsing caps only
    passed |= set(CHILD_ENVIRONMENT)  # one BLAS thread, set for every child
    passed |= {*ORT_OPT_OUT, *RAY_OPT_OUT}  # the child's own, set by its `import backend`
    assert set(seen) <= passed | {"PWD", "LC_CTYPE"}  # the last two set by bwrap and Python
    assert (
        run_in_child(probes.environment, timeout_s=60).value["AWS_SECRET_ACCESS_KEY"] == "hunter2"
    )


def test_sandboxed_child_cannot_reach_the_network() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        assert run_in_child(probes.connect, port, timeout_s=60).value == "connected"
        assert in_sandbox("connect", port) in ("ConnectionRefusedError", "OSError")


def test_without_a_working_sandbox_savedmodels_are_refused_with_the_reason(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(tmp_path / "no-bwrap"))
    saved = models.save_dense_savedmodel(tmp_path / "dense")
    archive = models.zip_folder(saved, tmp_path / "dense.zip")

    with pytest.raises(UserError) as refused:
        ingest_file(archive, "dense.zip")

    assert str(refused.value) == (
        "TensorFlow SavedModels are refused here because the bubblewrap sandbox "
        f"({str(tmp_path / 'no-bwrap')!r}) is not installed; install the Debian package "
        "bubblewrap or set OPTIBOARD_BWRAP to its path (loading one runs the uploader's code, "
        "which only ever happens inside that sandbox)."
    )
    assert model_store.list_models() == []
    with pytest.raises(UserError, match="is not installed; install the Debian package"):
        convert_savedmodel(saved, tmp_path / "dense.onnx")


def test_a_sandbox_that_cannot_start_is_reported_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create a namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(fake))

    state = sandbox.available()

    assert not state.ok
    assert "does not work here (bwrap: No permissions to create a namespace)" in state.reason


def test_hostile_savedmodel_initializer_never_reaches_the_host(
    data_dir: Path, tmp_path: Path
) -> None:
    canary = tmp_path / "canary.txt"
    saved = models.save_hostile_savedmodel(tmp_path / "hostile", canary)
    # the model really is hostile: loaded outside the sandbox, it writes the environment out
    assert run_in_child(probes.load_savedmodel, str(saved), timeout_s=120).ok
    assert b"PATH=" in canary.read_bytes()
    canary.unlink()
    archive = models.zip_folder(saved, tmp_path / "hostile.zip")

    with pytest.raises(UserError, match="tried to write files while it was being loaded") as err:
        ingest_file(archive, "hostile.zip")

    message = str(err.value)
    assert "\n" not in message and str(tmp_path) not in message  # one sentence, no server paths

    assert not canary.exists()
    assert model_store.list_models() == []
    assert not any((data_dir / "artifacts").rglob("*.*"))


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu child", "gpu child (all of /sys)"])
def test_only_a_measuring_child_sees_the_energy_counters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu: bool
) -> None:
    """RAPL's counters are a power side channel (CVE-2020-8694); until 2026-12-07 every sandboxed
    child saw them, converters and upload parsers included. This host has no powercap, so a
    folder of the test's stands in for them (and, where a GPU child gets all of /sys, a folder
    of /sys, emptied over for a child that does not measure)."""
    counters = Path("/sys/kernel/mm") if gpu else tmp_path / "powercap"
    if not gpu:
        (counters / "intel-rapl:0").mkdir(parents=True)
    monkeypatch.setattr(sandbox, "ENERGY_COUNTERS", (str(counters),))
    seen = {}
    for energy in (False, True):
        binds = sandbox.Binds.of(read_only=[TESTS], gpu=gpu, energy=energy)
        outcome = call_in_child(
            "tests.backend.launch.probes:listings", [str(counters)], timeout_s=60,
            what="The sandboxed child", sandboxed=True, binds=binds,
        )  # fmt: skip
        assert outcome.ok, outcome.error
        seen[energy] = outcome.value[str(counters)]

    assert seen[True] == sorted(p.name for p in counters.iterdir()) and seen[True]
    assert seen[False] == ([] if gpu else "FileNotFoundError")
