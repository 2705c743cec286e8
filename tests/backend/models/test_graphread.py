"""What the worker and the CLI read of an upload's graph, or of a graph a child wrote, is parsed
in a limited child once the file is past IN_PROCESS_BYTES: the serving plan, a generative
variant's weight facts, the mixed search's built graph and the CLI's dimension names. Until
2026-12-07 each was parsed, embedded weights and all, in the worker's or the CLI's own process.

Each test sets the threshold to 0 and asserts that the answer is the one read in process and
that it came from one sandboxed child seeing only the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from backend.engine.shapes import dim_params_of
from backend.errors import UserError
from backend.generate.facts import WeightFacts, weight_facts
from backend.graphview.structure import read_structure
from backend.models import graphread
from backend.serving.repository import plan_model, read_graph_io
from backend.serving.types import BatchingPolicy
from backend.viewer import op_histogram
from tests.bwrap_calls import child_calls, logging_bwrap
from tests.models import make_mlp, make_saturating_int8_matmul, make_symbolic_dim_model, save


def in_a_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every graph counts as large from here on; the log of the sandboxed children."""
    log = logging_bwrap(tmp_path, monkeypatch)
    monkeypatch.setattr(graphread, "IN_PROCESS_BYTES", 0)
    return log


def only_child_saw(log: Path, path: Path) -> None:
    (call,) = child_calls(log)
    assert f"--ro-bind {path.resolve()} {path.resolve()}" in call


def test_the_serving_plan_of_a_large_graph_is_read_in_a_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save(make_saturating_int8_matmul(), tmp_path / "int8.onnx")
    policy = BatchingPolicy(max_batch_size=8)
    here, graph = plan_model(path, policy), read_graph_io(path)
    log = in_a_child(tmp_path, monkeypatch)

    assert plan_model(path, policy) == here
    assert [t.name for t in here.inputs] == ["x"] and [t.name for t in here.outputs] == ["y"]
    only_child_saw(log, path)
    log.unlink()
    assert read_graph_io(path) == graph and graph["saturable"]  # its int8 weights, checked there
    only_child_saw(log, path)


def test_a_graph_the_plan_cannot_serve_is_refused_with_the_childs_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = helper.make_value_info(
        "s", helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    )
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph(
        [helper.make_node("SequenceAt", ["s", "i"], ["y"])],
        "seq",
        [value],
        [out],
        [numpy_helper.from_array(np.array(0, np.int64), "i")],
    )
    path = save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "s.onnx"
    )
    in_a_child(tmp_path, monkeypatch)

    with pytest.raises(UserError, match="Input 's' is not a tensor"):
        plan_model(path, BatchingPolicy(max_batch_size=8))


def test_weight_facts_of_a_large_graph_are_read_in_a_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decoder with one float MatMul weight and one MatMulNBits (4 bits, block 32), as the
    weight-only quantizer's child writes it."""
    k, n, block = 64, 16, 32
    blocks = k // block
    inits = [
        numpy_helper.from_array(np.ones((k, n), np.float32), "w"),
        numpy_helper.from_array(np.zeros((n, blocks, block // 2), np.uint8), "wq"),
        numpy_helper.from_array(np.ones((n * blocks,), np.float32), "scales"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node(
            "MatMulNBits", ["h", "wq", "scales"], ["y"], domain="com.microsoft",
            K=k, N=n, bits=4, block_size=block, accuracy_level=4,
        ),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "decoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        inits,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    path = save(helper.make_model(graph, opset_imports=opsets), tmp_path / "decoder.onnx")
    here = weight_facts(path)
    log = in_a_child(tmp_path, monkeypatch)

    assert weight_facts(path) == here
    assert (here.float_matmuls, here.bits, here.block_sizes) == (1, [4], [32])
    assert here.quantized[0].weight_bytes == n * blocks * block // 2 + n * blocks * 4
    assert here.total_bytes == k * n * 4 + here.quantized[0].weight_bytes
    only_child_saw(log, path)


def test_node_names_and_dimension_names_of_a_large_graph_are_read_in_a_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_mlp()
    for index, node in enumerate(model.graph.node):
        node.name = f"{node.op_type.lower()}{index}"
    mlp = save(model, tmp_path / "mlp.onnx")
    symbolic = save(make_symbolic_dim_model(), tmp_path / "symbolic.onnx")
    names, dims = graphread.node_names(mlp), dim_params_of(symbolic)
    log = in_a_child(tmp_path, monkeypatch)

    assert graphread.node_names(mlp) == names and "softmax5" in names and len(names) == 6
    only_child_saw(log, mlp)
    log.unlink()
    assert dim_params_of(symbolic) == dims and dims
    only_child_saw(log, symbolic)


def test_an_answer_that_does_not_read_is_one_sentence(tmp_path: Path) -> None:
    """What a child the upload took over may answer: the reader's type check turns it into a
    UserError, not an exception deep in the worker."""
    path = save(make_mlp(), tmp_path / "mlp.onnx")
    with pytest.raises(UserError, match="Reading it gave an answer that does not read"):
        graphread.parse_graph(
            path, lambda _: {"total_bytes": 1}, "Reading it", WeightFacts.from_dict
        )
    with pytest.raises(UserError, match="does not read"):
        graphread.parse_graph(path, lambda _: ["a", 3], "Reading it", graphread.strings)


READERS = {
    "node names": graphread.node_names,
    "dimension names": dim_params_of,
    "structure": read_structure,
    "weight facts": weight_facts,
    "operator counts": op_histogram,
    "serving inputs and outputs": read_graph_io,
}


@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
@pytest.mark.parametrize("large", [False, True], ids=["here", "in a child"])
def test_a_file_that_is_no_graph_is_one_sentence_for_every_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str, large: bool
) -> None:
    """Until graphread.load_graph each reader let protobuf's DecodeError out here, or a
    RuntimeError carrying the child's traceback; now either way it is the file's sentence."""
    bad = tmp_path / f"{reader.replace(' ', '_')}.onnx"
    bad.write_bytes(b"\xff\xfe not protobuf " * 4)
    log = in_a_child(tmp_path, monkeypatch) if large else None
    with pytest.raises(UserError, match=rf"^{bad.name} does not read as an ONNX graph \("):
        READERS[reader](bad)
    if log:
        only_child_saw(log, bad)
