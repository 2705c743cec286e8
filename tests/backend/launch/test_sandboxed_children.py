"""Measurement children run inside the bubblewrap sandbox: they see only their binds, reach no
network, and a host without a working sandbox gets each configuration refused with the reason."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest

import settings
from backend.engine.run import ConfigurationTask
from backend.jobs.measuring import MEASURE_PRELOAD, measure_in_child, measurement_binds
from backend.launch import sandbox
from backend.launch.children import call_in_child
from backend.launch.forks import Forks
from backend.measure_settings import MeasureSettings
from backend.models.ingest import ingest_file
from backend.results import ResultStatus
from backend.specs import SweepSpec
from tests.bwrap_calls import child_calls, logging_bwrap

TESTS = settings.PROJECT_ROOT / "tests"
QUICK = MeasureSettings(
    warmup_runs=2, window_runs=10, window_min_seconds=0.05, max_seconds=3, accuracy_samples=1
)


def _task(source: Path, output: Path, provider: str = "cpu") -> ConfigurationTask:
    config = SweepSpec(precisions=("fp32",), providers=(provider,), batch_sizes=(1,))
    first = config.configurations()[0]
    return ConfigurationTask(str(source), first, QUICK, str(output))


def test_a_measurement_child_sees_only_its_binds(data_dir: Path, mlp_path: Path) -> None:
    ingest_file(mlp_path, "mlp.onnx")  # the database file now exists beside the artifacts
    database = data_dir / "optiboard.db"
    assert database.is_file()
    output, elsewhere = data_dir.parent / "out", data_dir.parent / "elsewhere"
    elsewhere.mkdir()
    task = _task(mlp_path, output)
    binds = measurement_binds(task)
    binds = dataclasses.replace(binds, read_only=(*binds.read_only, TESTS))  # the probe's code
    paths = [str(database), str(mlp_path), str(output), str(elsewhere), str(data_dir)]

    seen = call_in_child(
        "tests.backend.launch.probes:isolation",
        paths,
        timeout_s=60,
        what="The probe",
        sandboxed=True,
        binds=binds,
    ).value

    assert seen["mnt"] != os.readlink("/proc/self/ns/mnt")  # a mount namespace of its own
    assert seen["net"] != os.readlink("/proc/self/ns/net")  # and no network
    assert seen["exists"] == {
        str(database): False,
        str(mlp_path): True,
        str(output): True,
        str(elsewhere): False,
        str(data_dir): False,
    }
    assert seen["writable"][str(mlp_path)] is False and seen["writable"][str(output)] is True
    interpreter = Path(sys.base_prefix).resolve().parts  # pyenv's Python may live in /root
    allowed = {interpreter[2]} if interpreter[:2] == ("/", "root") else set()
    assert set(seen["root"] or []) <= allowed  # none of /root but the interpreter's folder
    assert not (elsewhere / ".probe").exists() and (output / ".probe").exists()


def test_a_real_measurement_runs_through_bwrap_with_only_its_binds(
    data_dir: Path, mlp_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bwrap itself runs the child; a wrapper in front of it only writes its argv down."""
    log = logging_bwrap(tmp_path, monkeypatch)
    output = tmp_path / "out"

    task = _task(mlp_path, output)
    result = measure_in_child(task, timeout_s=120)

    assert result is not None and result.status == ResultStatus.OK, result and result.error
    assert result.configuration is task.configuration  # sent once, not echoed back and re-read
    assert result.latency is not None and result.latency.mean > 0
    calls = child_calls(log)
    assert len(calls) == 1, calls  # one sandboxed child
    argv = calls[0].split()
    assert "--unshare-all" in argv and "--share-net" not in argv and "--clearenv" in argv
    assert f"--ro-bind {mlp_path} {mlp_path}" in calls[0]
    assert f"--bind {output} {output}" in calls[0]
    assert str(data_dir) not in calls[0] and "/dev/nvidia" not in calls[0]


def test_a_measurement_forked_from_the_jobs_server_reads_as_a_cold_childs(
    mlp_path: Path, tmp_path: Path
) -> None:
    """The same INT8 configuration in a cold sandboxed child and in two forks of one server:
    the same outputs, providers, steps and runtime facts, and a peak memory of its own."""
    spec = SweepSpec(precisions=("int8_static",), providers=("cpu",), batch_sizes=(1,))
    task = ConfigurationTask(str(mlp_path), spec.configurations()[0], QUICK, str(tmp_path / "o"))

    cold = measure_in_child(task, timeout_s=120)
    with Forks(MEASURE_PRELOAD) as forks:
        warm = [measure_in_child(task, timeout_s=120, forks=forks) for _ in range(2)]

    assert forks.started == 1
    for result in (cold, *warm):
        assert result is not None and result.status == ResultStatus.OK, result and result.error
        assert result.accuracy is not None and result.accuracy.cosine_similarity > 0.99
    assert cold is not None and all(w is not None for w in warm)
    for result in warm:
        assert result.accuracy.max_abs_error == cold.accuracy.max_abs_error  # type: ignore[union-attr]
        assert result.providers_used == cold.providers_used == ["CPUExecutionProvider"]
        assert result.steps == cold.steps and result.runtime_facts == cold.runtime_facts
        assert result.peak_rss_scope == cold.peak_rss_scope
        assert 0.5 < result.peak_rss_mb / cold.peak_rss_mb < 2  # type: ignore[operator]


def test_without_a_working_sandbox_a_configuration_is_refused_with_the_reason(
    data_dir: Path, mlp_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(tmp_path / "no-bwrap"))

    result = measure_in_child(_task(mlp_path, tmp_path / "out"), timeout_s=120)

    assert result is not None and result.status == ResultStatus.FAILED
    assert result.error == (
        "Not measured: a configuration runs the uploaded model only inside the sandbox, and "
        f"the bubblewrap sandbox ({str(tmp_path / 'no-bwrap')!r}) is not installed; install the "
        "Debian package bubblewrap or set OPTIBOARD_BWRAP to its path."
    )
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_gpu_child_gets_the_device_nodes_and_a_cpu_child_none(
    tmp_path: Path, mlp_path: Path
) -> None:
    dev = tmp_path / "dev"
    (dev / "dri").mkdir(parents=True)
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "null"):
        (dev / name).touch()
    assert [p.name for p in sandbox.gpu_devices(dev)] == [
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidia0",
        "nvidiactl",
        "dri",
    ]
    cuda = _task(mlp_path, tmp_path / "out", provider="cuda")
    cpu = _task(mlp_path, tmp_path / "out", provider="cpu")
    assert measurement_binds(cuda).gpu
    assert not measurement_binds(cpu).gpu
    gpu_argv = sandbox.command(["true"], tmp_path, binds=sandbox.Binds(gpu=True))
    assert "--ro-bind /sys /sys" in " ".join(gpu_argv)
    for node in sandbox.gpu_devices():  # none on a host without a GPU
        assert f"--dev-bind {node} {node}" in " ".join(gpu_argv)
    assert "--dev-bind" not in sandbox.command(["true"], tmp_path)


def test_a_gpu_child_keeps_its_callers_library_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Triton's bundled libraries stay first on LD_LIBRARY_PATH when it gets the GPU."""
    monkeypatch.setenv("LD_LIBRARY_PATH", "/host/cuda/lib64")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    binds = sandbox.Binds(gpu=True, env=(("LD_LIBRARY_PATH", "/triton/libs:/host/cuda/lib64"),))
    argv = sandbox.command(["true"], tmp_path, binds=binds)
    settings_of = {}
    for index, word in enumerate(argv):
        if word == "--setenv":
            settings_of[argv[index + 1]] = argv[index + 2]  # bwrap applies them in order
    assert settings_of["LD_LIBRARY_PATH"] == "/triton/libs:/host/cuda/lib64"
    assert settings_of["CUDA_VISIBLE_DEVICES"] == "1"


def test_no_child_starts_blas_threads_beside_the_runtime(
    data_dir: Path, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy's OpenBLAS would start a busy-waiting thread per core in every child (launch/limits
    CHILD_ENVIRONMENT); a host's own setting reaches no child."""
    import subprocess

    from backend.launch.children import run_in_child
    from tests.backend.launch import probes

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", str(max(os.cpu_count() or 1, 2)))
    plain = subprocess.run(
        [sys.executable, "-c", "from tests.backend.launch import probes as p; "
         "print(p.threads_after_numpy())"],
        capture_output=True, text=True, check=True, cwd=settings.PROJECT_ROOT,
    )  # fmt: skip
    if (os.cpu_count() or 1) > 1:
        assert int(plain.stdout) > 1  # what a child would start without the setting
    binds = measurement_binds(_task(mlp_path, data_dir.parent / "out"))
    binds = dataclasses.replace(binds, read_only=(*binds.read_only, TESTS))  # the probe's code
    sandboxed = call_in_child(
        "tests.backend.launch.probes:threads_after_numpy",
        timeout_s=60,
        what="The probe",
        sandboxed=True,
        binds=binds,
    )
    unsandboxed = run_in_child(probes.threads_after_numpy, timeout_s=60)
    assert (sandboxed.value, unsandboxed.value) == (1, 1)


@pytest.mark.parametrize("kind", ["link", "fifo"])
@pytest.mark.parametrize("through", ["child", "fork"])
def test_a_child_that_leaves_a_link_or_fifo_in_its_output_folder_fails_whatever_it_answers(
    data_dir: Path, tmp_path: Path, kind: str, through: str
) -> None:
    """Its parent reads that folder on the host, where the link's target is the host's (the
    database here) and a FIFO blocks the reader; until 2026-12-07 such a child's answer stood."""
    out = tmp_path / "out"
    out.mkdir()
    binds = sandbox.Binds.of(read_only=[TESTS], writable=[out])
    args = ("tests.backend.launch.probes:leave_in", str(out), kind, str(data_dir / "optiboard.db"))
    kwargs: dict = {"timeout_s": 60, "what": "The probe", "sandboxed": True, "binds": binds}
    if through == "fork":
        with Forks(("tests.backend.launch.probes",)) as forks:
            outcome = forks.call(*args, **kwargs)
    else:
        outcome = call_in_child(*args, **kwargs)

    assert not outcome.ok and outcome.limit == "links"
    assert outcome.error == (
        "The probe left a link or a special file in its output folder, which only a child the "
        "model took over does; nothing it made is used."
    )
