"""DeviceBinding's binding sequence on real ONNX Runtime sessions, with CPU IOBinding standing in
for the GPU: fixed input and output buffers bound before the first run, no run on any other
binding (under CUDA graphs that first run is the capture, and an earlier run on another binding
left the bound outputs all zeros on an H200), and outputs read from the bound buffers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from backend.runtimes.ort_cuda import (
    DeviceBinding,
    declared_output_shapes,
    learn_output_shapes,
    output_shapes,
)
from tests import models


def _session(path: Path, profile_prefix: Path | None = None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    if profile_prefix is not None:  # ORT's own record of every run the session made
        options.enable_profiling = True
        options.profile_file_prefix = str(profile_prefix)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _runs(session: ort.InferenceSession) -> int:
    events = json.loads(Path(session.end_profiling()).read_text())
    return sum(1 for event in events if event.get("name") == "model_run")


def _computed_dim_model(tmp_path: Path) -> Path:
    """y = Reshape(x, [-1, 4]): y's first dimension is computed, so no declared name binds it."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 4])
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "computed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        [shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "computed.onnx"
    onnx.save(model, str(path))
    return path


def test_every_run_uses_the_bound_buffers_and_outputs_match_a_plain_run(tmp_path: Path) -> None:
    path = models.save(models.make_mlp(), tmp_path / "mlp.onnx")
    session = _session(path, tmp_path / "timed")
    reference = _session(path)
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.normal(size=(8, 16)).astype(np.float32)} for _ in range(3)]

    shapes = declared_output_shapes(session, feeds[0])
    assert shapes == [(8, 10)]  # "N" bound by the feed, no run needed
    bound = DeviceBinding(session, feeds[0], shapes, device="cpu")
    address = bound._outputs[0].data_ptr()
    got = [bound.infer(feed)[0] for feed in feeds]  # each kept while the next ones run
    for output, feed in zip(got, feeds, strict=True):
        np.testing.assert_allclose(output, reference.run(None, feed)[0], rtol=1e-6)
    bound.run()  # the timed call: the last inputs again, into the same buffer
    np.testing.assert_allclose(bound.outputs()[0], reference.run(None, feeds[-1])[0], rtol=1e-6)
    assert bound._outputs[0].data_ptr() == address
    # 3 infer() + 1 run(): the constructor ran nothing, so the first run was on the final binding
    assert _runs(session) == 4


def test_shapes_a_graph_computes_come_from_a_second_session_never_the_timed_one(
    tmp_path: Path,
) -> None:
    path = _computed_dim_model(tmp_path)
    timed = _session(path, tmp_path / "timed")
    feed = {"x": np.arange(48, dtype=np.float32).reshape(3, 16)}
    assert declared_output_shapes(timed, feed) is None
    opened: list[ort.InferenceSession] = []

    def open_plain() -> ort.InferenceSession:
        opened.append(_session(path))
        return opened[-1]

    shapes = output_shapes(timed, feed, graph=True, open_plain=open_plain, device="cpu")
    assert shapes == [(12, 4)] and len(opened) == 1
    bound = DeviceBinding(timed, feed, shapes, device="cpu")
    np.testing.assert_array_equal(bound.infer(feed)[0], feed["x"].reshape(12, 4))
    assert _runs(timed) == 1  # only the bound run


def test_without_graphs_the_session_learns_its_own_shapes(tmp_path: Path) -> None:
    path = _computed_dim_model(tmp_path)
    session = _session(path)
    feed = {"x": np.ones((5, 16), np.float32)}
    assert learn_output_shapes(session, feed, device="cpu") == [(20, 4)]

    def never() -> ort.InferenceSession:
        raise AssertionError("no second session without CUDA graphs")

    assert output_shapes(session, feed, graph=False, open_plain=never, device="cpu") == [(20, 4)]
