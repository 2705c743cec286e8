"""Graph page on a model past the viewer's limit (OPTIBOARD_VIEWER_MAX_MB set to 1 here): Netron
gets a structure-only copy made in a limited child and cached per digest, and the page says the
weights are not loaded."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import onnx
import pytest

from backend.graphview import skeleton
from backend.graphview.structure import read_structure
from backend.models import derived, library
from tests import models as model_factory
from tests.pages.seed import add_model, open_page, texts


@pytest.fixture
def large_mlp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An MLP with 2.1 MB of weights (a 512 x 1024 float matrix), over a 1 MB viewer limit."""
    monkeypatch.setenv("OPTIBOARD_VIEWER_MAX_MB", "1")
    model = model_factory.make_mlp(features=512, hidden=1024, classes=10)
    return model_factory.save(model, tmp_path / "wide.onnx")


def test_a_large_upload_is_shown_from_a_weightless_copy_made_in_a_child(
    data_dir: Path, large_mlp: Path
) -> None:
    model = add_model(large_mlp, "wide")
    artifact = library.list_artifacts(model.id)[0]
    upload = library.artifact_path(artifact.sha256)
    assert artifact.size_bytes > 2_000_000

    at = open_page("graph", model=model.id)
    assert not at.exception
    src = at.get("iframe")[0].proto.src
    assert parse_qs(urlparse(src).query)["identifier"] == ["wide.onnx"]
    shown = texts(at)
    assert "Weights not loaded" in shown, shown

    copy = derived.skeleton_path(artifact.sha256)
    assert copy.is_file() and copy.stat().st_size < 20_000  # the weights' 2 MB left out
    again = skeleton.skeleton_of(upload, artifact.sha256)
    assert again.cached and again.path == copy

    original, weightless = onnx.load(str(upload)), onnx.load(str(copy))
    assert [(n.name, n.op_type, list(n.input), list(n.output)) for n in original.graph.node] == [
        (n.name, n.op_type, list(n.input), list(n.output)) for n in weightless.graph.node
    ]
    assert [(t.name, t.data_type, list(t.dims)) for t in original.graph.initializer] == [
        (t.name, t.data_type, list(t.dims)) for t in weightless.graph.initializer
    ]
    w1 = next(t for t in weightless.graph.initializer if t.name == "w1")
    assert not w1.raw_data and not w1.float_data and not w1.external_data
    b2 = next(t for t in weightless.graph.initializer if t.name == "b2")  # 40 bytes: kept
    assert b2.raw_data or b2.float_data
    assert read_structure(copy) == read_structure(upload)  # overlays match the copy as the upload

    library.delete_model(model.id)
    assert not copy.exists()  # removed with the last blob it was made from


def test_the_copy_is_made_in_a_child_process(data_dir: Path, large_mlp: Path) -> None:
    model = add_model(large_mlp, "wide")
    artifact = library.list_artifacts(model.id)[0]
    made = skeleton.skeleton_of(library.artifact_path(artifact.sha256), artifact.sha256)
    assert not made.cached and made.made_by not in (0, os.getpid())


def test_strip_weights_reaches_constants_and_subgraphs() -> None:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    big = numpy_helper.from_array(np.ones((64, 64), np.float32), "big")
    small = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    branch = helper.make_graph(
        [helper.make_node("Constant", [], ["c"], value=big)],
        "branch",
        [],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [64, 64])],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["s"], value=small),
            helper.make_node("If", ["cond"], ["c"], then_branch=branch, else_branch=branch),
        ],
        "g",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [64, 64])],
    )
    model = helper.make_model(graph)
    assert skeleton.strip_weights(model) == 2  # the big Constant in each branch; 'shape' kept
    kept = model.graph.node[0].attribute[0].t
    assert numpy_helper.to_array(kept).tolist() == [1, -1]
    stripped = model.graph.node[1].attribute[0].g.node[0].attribute[0].t
    assert list(stripped.dims) == [64, 64] and not stripped.raw_data
