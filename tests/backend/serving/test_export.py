"""The exported Triton repository, parsed with Triton's own model_config protobuf."""

from __future__ import annotations

import re
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from backend.errors import UserError
from backend.hardware import has_vnni
from backend.serving.export import (
    LOCAL,
    Device,
    ServingTarget,
    export_repository,
    parse_config,
    perf_analyzer_command,
)
from backend.serving.loadgen import run_load
from backend.serving.repository import config_text as repository_config
from backend.serving.repository import plan_model
from backend.serving.server import TritonEnvironment, TritonServer
from backend.serving.types import BatchingPolicy, LoadSpec, Scenario
from backend.specs import MEASURE_PRESETS
from tests.backend.test_cli import optiboard
from tests.models import make_cnn, make_mlp, make_saturating_int8_matmul, save
from tests.pages.seed import add_model

POLICY = BatchingPolicy(
    max_batch_size=16, preferred_batch_sizes=(4, 8), max_queue_delay_us=500, instance_count=2
)


def _read(zip_path: Path, name: str) -> dict[str, bytes]:
    with zipfile.ZipFile(zip_path) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


def test_a_cpu_repository_holds_the_model_and_a_config_triton_parses(tmp_path: Path) -> None:
    onnx_path = save(make_mlp(), tmp_path / "mlp.onnx")
    load = LoadSpec(Scenario.SERVER, target_rps=300, duration_s=4)
    out = export_repository(ServingTarget("mlp", POLICY), onnx_path, tmp_path / "repo.zip", load)
    files = _read(out, "mlp")
    local = {f"{LOCAL}/mlp/config.pbtxt", f"{LOCAL}/mlp/1/model.py", f"{LOCAL}/mlp/1/model.onnx"}
    assert set(files) == {"mlp/1/model.onnx", "mlp/config.pbtxt", "mlp/perf_analyzer.txt", *local}
    assert files["mlp/1/model.onnx"] == onnx_path.read_bytes()
    config = text_format.Parse(files["mlp/config.pbtxt"].decode(), model_config_pb2.ModelConfig())
    assert (config.name, config.platform, config.max_batch_size) == ("mlp", "onnxruntime_onnx", 16)
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    group = config.instance_group[0]
    assert (group.count, group.kind) == (2, model_config_pb2.ModelInstanceGroup.KIND_CPU)
    assert [(i.name, list(i.dims)) for i in config.input] == [("x", [16])]
    assert not config.optimization.execution_accelerators.gpu_execution_accelerator
    command = files["mlp/perf_analyzer.txt"].decode()
    assert "--request-rate-range=300:300:1" in command and "--measurement-interval=4000" in command


def test_a_gpu_repository_asks_for_tensorrt_at_the_variant_precision(tmp_path: Path) -> None:
    onnx_path = save(make_cnn(), tmp_path / "cnn.onnx")
    target = ServingTarget("cnn", POLICY, Device.GPU, "fp16")
    files = _read(export_repository(target, onnx_path, tmp_path / "r.zip"), "cnn")
    config = parse_config(files["cnn/config.pbtxt"].decode())
    assert config.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_GPU
    (accelerator,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert accelerator.name == "tensorrt"
    assert accelerator.parameters["precision_mode"] == "FP16"


def test_a_pasted_config_with_slash_comments_is_one_sentence_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    with pytest.raises(UserError) as caught:
        parse_config('// from a blog post\nname: "mlp"\nmax_batch_size: 8\n')
    message = str(caught.value)
    assert "line 1, column 1" in message and "no // comments" in message
    assert message.count(". ") == 0 and message.endswith(".")
    with pytest.raises(UserError, match="exceeds max_batch_size 8"):
        parse_config("max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 16 ] }")


def test_a_fixed_batch_axis_refuses_batching_and_offers_a_fixed_batch_server(
    tmp_path: Path,
) -> None:

    model = make_mlp()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1  # batch fixed at 1
    onnx_path = save(model, tmp_path / "fixed.onnx")
    dest = tmp_path / "fixed.zip"
    with pytest.raises(UserError, match="fixed batch axis of 1.*fixed-batch server"):
        export_repository(ServingTarget("fixed", POLICY), onnx_path, dest)
    assert not dest.exists() and not list(tmp_path.glob("*.part"))
    single = BatchingPolicy(max_batch_size=1, dynamic_batching=False)
    files = _read(export_repository(ServingTarget("fixed", single), onnx_path, dest), "fixed")
    config = parse_config(files["fixed/config.pbtxt"].decode())
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert list(config.input[0].dims) == [1, 16]


def test_perf_analyzer_reproduces_a_concurrency_sweep_point() -> None:
    command = perf_analyzer_command("cnn", LoadSpec(Scenario.CONCURRENCY, concurrency=8))
    assert command.startswith("perf_analyzer -m cnn ")
    assert "--concurrency-range=8:8:1" in command and "--percentile=99" in command


def test_the_perf_analyzer_line_judges_stability_by_the_rule_its_point_was_judged_by(
    server: TritonServer,
) -> None:
    """A point measured on the real server says 'within N%' (or 'more than N%'): the line
    that reproduces it asks perf_analyzer for the same N, whichever preset measured it."""
    for preset in ("quick", "thorough"):
        measure = MEASURE_PRESETS[preset]
        spec = LoadSpec(Scenario.CONCURRENCY, duration_s=0.6, concurrency=2)
        point = run_load(server.endpoint, spec, replace(measure, warmup_runs=2))
        rule = re.search(r"(?:within|more than) (\d+)%", point.stability_note)
        assert rule is not None, point.stability_note
        command = perf_analyzer_command("mlp", point.spec, measure=measure)
        assert f"--stability-percentage={rule.group(1)} " in command + " ", (command, point)
    default = perf_analyzer_command("mlp", spec)  # the load generator's own default: quick
    assert "--stability-percentage=25" in default


def test_a_model_name_triton_cannot_use_is_refused() -> None:
    with pytest.raises(UserError, match="cannot name a Triton model"):
        ServingTarget("../etc", POLICY)


def test_the_zip_and_the_local_server_share_one_writer_and_triton_loads_the_local_variant(
    tmp_path: Path, triton_environment: TritonEnvironment
) -> None:
    """The exported config and the one the local server measured differ only where the backend
    does; the zip's local-python-backend folder is a repository the real tritonserver serves."""
    onnx_path = save(make_mlp(), tmp_path / "mlp.onnx")
    target = ServingTarget("mlp", POLICY)
    files = _read(export_repository(target, onnx_path, tmp_path / "repo.zip"), "mlp")
    exported = parse_config(files["mlp/config.pbtxt"].decode())
    local = parse_config(files[f"{LOCAL}/mlp/config.pbtxt"].decode())
    measured = plan_model(onnx_path, POLICY)  # what `serve(...)` writes for the local server
    served = parse_config(repository_config(replace(measured, name="mlp")))
    for config in (exported, local):
        assert config.input == served.input and config.output == served.output
        assert config.dynamic_batching == served.dynamic_batching
        assert config.instance_group == served.instance_group
        assert config.max_batch_size == served.max_batch_size == 16
    assert (local.backend, exported.platform) == ("python", "onnxruntime_onnx")

    with zipfile.ZipFile(tmp_path / "repo.zip") as archive:
        archive.extractall(tmp_path / "unzipped")
    workdir = tmp_path / "server"
    workdir.mkdir()
    server = TritonServer(triton_environment, replace(measured, name="mlp"), workdir)
    try:
        server.start(tmp_path / "unzipped" / LOCAL, timeout_s=60)
        stats = server.stats()
    finally:
        server.stop()
    assert stats["name"] == "mlp" and stats["version"] == "1"


EVIL = 'parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "/tmp/evil" } }'
INJECTED = (
    f'x" }} {EVIL} input {{ name: "y',  # a block form config
    # closes the `input [ {` list the text writer used: that config parsed and shipped
    f'x" data_type: TYPE_FP32 dims: [ 16 ] }} ] {EVIL} input [ {{ name: "y',
)


@pytest.mark.parametrize("crafted", INJECTED)
def test_a_crafted_tensor_name_stays_one_name_in_every_exported_config(
    crafted: str, data_dir: Path, tmp_path: Path
) -> None:
    """Written as text, such an input name closed its own block and added a parameters block
    that points the Python backend at another interpreter."""
    from backend.cli import main

    model = make_mlp()
    for node in model.graph.node:
        node.input[:] = [crafted if name == "x" else name for name in node.input]
    model.graph.input[0].name = crafted
    onnx_path = save(model, tmp_path / "crafted.onnx")
    assert main(["add", str(onnx_path)]) == 0
    out = tmp_path / "crafted.zip"
    assert main(["serve", "export", "1", "--name", "crafted", "-o", str(out)]) == 0
    files = _read(out, "crafted")
    for name in ("crafted/config.pbtxt", f"{LOCAL}/crafted/config.pbtxt"):
        config = parse_config(files[name].decode())
        assert [(i.name, list(i.dims)) for i in config.input] == [(crafted, [16])], name
        assert "EXECUTION_ENV_PATH" not in config.parameters, name
    local = parse_config(files[f"{LOCAL}/crafted/config.pbtxt"].decode())
    assert set(local.parameters) == {"intra_op_threads", "provider"}


def test_an_int8_export_says_where_the_deployment_runs_otherwise_than_the_sweep(
    data_dir: Path, tmp_path: Path
) -> None:
    """Without VNNI the sweep and the local server run exact int8 kernels through a session
    setting Triton's ONNX Runtime backend cannot take: the export says so, in the zip and on
    the command line. An FP32 model, or a CPU with VNNI, gets no such note."""
    path = save(make_saturating_int8_matmul(), tmp_path / "q.onnx")
    model = add_model(path, "q")
    out = tmp_path / "q.zip"
    done = optiboard("serve", "export", str(model.id), "--output", str(out))
    assert done.returncode == 0, done.stderr
    files = _read(out, f"model_{model.id}")
    if has_vnni():
        assert "note" not in done.stdout and f"model_{model.id}/notes.txt" not in files
    else:
        note = files[f"model_{model.id}/notes.txt"].decode()
        assert "session.x64quantprecision=1" in note and "runs ONNX Runtime's U8S8" in note
        assert "note (" in done.stdout and "--int8-matmul u8s8" in done.stdout
    mlp = save(make_mlp(), tmp_path / "mlp.onnx")
    fp32 = export_repository(ServingTarget("mlp", POLICY), mlp, tmp_path / "mlp.zip")
    assert "mlp/notes.txt" not in _read(fp32, "mlp")
