"""The real tritonserver: it serves the ONNX file, and says why when it cannot."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from backend.errors import UnavailableError
from backend.hardware import has_vnni
from backend.launch.folders import owned_folder
from backend.launch.services import group_members
from backend.serving.loadgen import run_load
from backend.serving.repository import plan_model
from backend.serving.server import TritonEnvironment, TritonServer, find_environment, serve
from backend.serving.types import LoadSpec, Scenario
from backend.specs import MEASURE_PRESETS
from tests import models as model_factory
from tests.backend.serving.conftest import POLICY

ROOT = Path(__file__).resolve().parents[3]


def _infer(server: TritonServer, batch: np.ndarray) -> np.ndarray:
    body = {
        "inputs": [
            {
                "name": "x",
                "shape": list(batch.shape),
                "datatype": "FP32",
                "data": batch.ravel().tolist(),
            }
        ]
    }
    request = urllib.request.Request(
        f"http://{server.endpoint.http_url}/v2/models/{server.endpoint.model}/infer",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        output = json.loads(response.read())["outputs"][0]
    return np.asarray(output["data"], dtype=np.float32).reshape(output["shape"])


def test_served_model_answers_like_onnx_runtime_on_loopback(
    server: TritonServer, session_model: Path
) -> None:
    batch = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    expected = ort.InferenceSession(str(session_model)).run(None, {"x": batch})[0]
    np.testing.assert_allclose(_infer(server, batch), expected, rtol=1e-5, atol=1e-6)
    assert server.endpoint.http_url.startswith("127.0.0.1:")
    config = (server.workdir / "models/model/config.pbtxt").read_text()
    assert 'backend: "python"' in config and "max_queue_delay_microseconds: 5000" in config
    assert "kind: KIND_CPU" in config and server.endpoint.max_batch_size == 16


def test_missing_environment_is_unavailable_with_the_setup_command(tmp_path: Path) -> None:
    with pytest.raises(UnavailableError, match="scripts/setup-triton"):
        find_environment(tmp_path / "no-venv")


def test_model_that_onnx_runtime_cannot_load_gives_tritons_log_line(
    triton_environment: TritonEnvironment, tmp_path: Path
) -> None:
    broken = model_factory.save(model_factory.make_custom_op_model(), tmp_path / "custom.onnx")
    with (
        pytest.raises(UnavailableError) as caught,
        serve(broken, POLICY, environment=triton_environment),
    ):
        pass
    message = str(caught.value)
    assert message.startswith("Triton could not serve the model")
    assert "failed to load 'model'" in message and "MyOp" in message


def test_environment_without_the_python_backend_gives_tritons_log_line(
    triton_environment: TritonEnvironment, session_model: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "backends"
    empty.mkdir()
    broken = replace(triton_environment, backends=empty)
    with (
        pytest.raises(UnavailableError) as caught,
        serve(session_model, POLICY, environment=broken),
    ):
        pass
    assert "python" in str(caught.value) and "backend" in str(caught.value)


def _fixed_batch_mlp() -> onnx.ModelProto:
    model = model_factory.make_mlp()
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_value = 4
    return model


def test_fixed_batch_model_is_served_without_dynamic_batching_and_says_why(
    triton_environment: TritonEnvironment, tmp_path: Path
) -> None:
    path = model_factory.save(_fixed_batch_mlp(), tmp_path / "fixed.onnx")
    planned = plan_model(path, POLICY)
    assert planned.max_batch_size == 0 and not planned.policy.dynamic_batching
    assert planned.fixed_batch_note.startswith("Dynamic batching is impossible")
    assert (
        "fixed at 4" in planned.fixed_batch_note
        and "fixed-batch server" in planned.fixed_batch_note
    )
    with serve(path, POLICY, environment=triton_environment) as running:
        assert "dynamic_batching" not in (running.workdir / "models/model/config.pbtxt").read_text()
        spec = LoadSpec(Scenario.CONCURRENCY, duration_s=0.5, concurrency=4)
        point = run_load(running.endpoint, spec, MEASURE_PRESETS["quick"])
    # each execution is one request of the model's fixed 4 samples: Triton counts batch 1
    assert point.batch_histogram and set(point.batch_histogram) == {1}
    assert point.notes[0] == planned.fixed_batch_note and point.policy == planned.policy
    # anything after it is the machine's own contention, said as such (a busy CI host)
    assert all(n.startswith("While this was measured") for n in point.notes[1:]), point.notes
    assert point.errors == 0


def test_an_int8_model_is_served_with_the_int8_kernels_a_sweep_measures_on_this_cpu(
    triton_environment: TritonEnvironment, tmp_path: Path
) -> None:
    """Without VNNI a sweep's ONNX Runtime session runs exact U8U8 int8 matmuls; the served model
    does too, so the server computes what was measured (U8S8 here would give about half)."""
    path = model_factory.save(model_factory.make_saturating_int8_matmul(), tmp_path / "q.onnx")
    exact = not has_vnni()
    setting = ("session.x64quantprecision", "1")
    assert plan_model(path, POLICY).session_config == ((setting,) if exact else ())
    fp32 = model_factory.save(model_factory.make_mlp(), tmp_path / "mlp.onnx")
    assert plan_model(fp32, POLICY).session_config == ()  # no int8 ops: nothing to change
    with serve(path, POLICY, environment=triton_environment) as running:
        config = (running.workdir / "models/model/config.pbtxt").read_text()
        assert ("session.x64quantprecision" in config) is exact
        answer = _infer(running, np.ones((1, 64), np.float32))
        options = running.session_options
    np.testing.assert_allclose(answer, np.full((1, 4), 64.0))
    assert ("session.x64quantprecision=1" in options) is exact


def _alive_in_group(group: int) -> list[int]:
    """Processes of a process group that still run (zombies awaiting their reaper do not)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, pgrp = stat.read_text().rpartition(")")[2].split()[:3]
        except (OSError, ValueError):
            continue
        if int(pgrp) == group and state != "Z":
            alive.append(int(stat.parent.name))
    return alive


def _stub_regions(group: int) -> set[Path]:
    """The shared memory regions the group's Python-backend stubs were started with (each
    stub's second argument names its region, whatever the server's prefix)."""
    regions = set()
    for pid in _alive_in_group(group):
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if argv[0].endswith(b"triton_python_backend_stub"):
            regions.add(Path(f"/proc/{pid}/root/dev/shm") / argv[2].decode())
    return regions


def test_stopping_the_server_ends_its_processes_and_removes_its_shared_memory(
    triton_environment: TritonEnvironment, session_model: Path
) -> None:
    """Two instances, two stubs: a SIGTERM to the whole group killed a stub before Triton
    unloaded it, and its /dev/shm region stayed (one per `serve recommend` server)."""
    two = replace(POLICY, instance_count=2)
    with serve(session_model, two, environment=triton_environment) as running:
        group = running.process.pid
        assert len(_alive_in_group(group)) >= 3  # tritonserver and one stub per instance
        regions = _stub_regions(group)
        assert regions and all(region.exists() for region in regions)
        spec = LoadSpec(Scenario.CONCURRENCY, duration_s=0.5, concurrency=4)
        assert run_load(running.endpoint, spec, MEASURE_PRESETS["quick"]).errors == 0
    assert _alive_in_group(group) == []
    assert [region for region in regions if region.exists()] == []


def test_a_server_whose_parent_is_killed_still_ends_its_stubs_and_shared_memory(
    session_model: Path, tmp_path: Path
) -> None:
    """The worker SIGKILLed (a crash, the OOM killer): Triton is told with a signal it handles,
    so it unloads the model, its stubs exit and their regions are released; the repository the
    worker could not remove (a link or a copy of the model) goes with the next folder any
    Optiboard process makes."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from backend.serving.server import serve\n"
        "from backend.serving.types import BatchingPolicy\n"
        "with serve(Path(sys.argv[1]), BatchingPolicy(max_batch_size=4, instance_count=2)) as s:\n"
        "    print(s.process.pid, s.workdir, flush=True)\n"
        "    time.sleep(300)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(session_model)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        pid, workdir = parent.stdout.readline().split()
        group, repository = int(pid), Path(workdir)
        regions = _stub_regions(group)
        assert (repository / "models").is_dir()
        assert regions
        owner = os.open(f"{repository}.owner", os.O_RDWR)  # an owned folder, locked by its
        try:  # server's parent: swept once that lock is free, by any process at once
            with pytest.raises(BlockingIOError):
                fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(owner)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 20
    while _alive_in_group(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive_in_group(group) == []
    assert [region for region in regions if region.exists()] == []
    with owned_folder():
        assert not repository.exists()


def test_the_server_runs_inside_the_sandbox_on_the_hosts_loopback(
    server: TritonServer, tmp_path: Path
) -> None:
    assert server.process is not None
    members = group_members(server.process.pid)
    triton = next(pid for pid, name in members.items() if name == "tritonserver")
    assert "bwrap" in members.values()
    ours = {kind: Path(f"/proc/self/ns/{kind}").readlink() for kind in ("mnt", "pid", "net")}
    its = {kind: Path(f"/proc/{triton}/ns/{kind}").readlink() for kind in ("mnt", "pid", "net")}
    assert its["mnt"] != ours["mnt"] and its["pid"] != ours["pid"]
    assert its["net"] == ours["net"]  # shared on purpose: its ports are on the host's 127.0.0.1
    root = Path(f"/proc/{triton}/root")  # the file system as the server sees it
    assert not (root / tmp_path.relative_to("/")).exists()  # no host folder it was not given
    assert (root / server.workdir.relative_to("/") / "models").is_dir()


def test_without_a_working_sandbox_nothing_is_served(
    triton_environment: TritonEnvironment,
    session_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(tmp_path / "no-bwrap"))
    with pytest.raises(UnavailableError, match=r"served only inside the sandbox, but the bubblew"):
        with serve(session_model, POLICY, environment=triton_environment):
            pass


def test_a_sandboxed_server_still_shuts_down_gracefully_on_sigterm(
    triton_environment: TritonEnvironment, session_model: Path
) -> None:
    """bwrap itself would die of the group's SIGTERM and take the server down with SIGKILL
    (--die-with-parent) before Triton's own shutdown ran; it ignores SIGTERM instead."""
    with serve(session_model, POLICY, environment=triton_environment) as running:
        running.stop()
        log = running.log_text()
    assert "Signal (15) received." in log
    assert "successfully unloaded 'model' version 1" in log, log[-600:]
