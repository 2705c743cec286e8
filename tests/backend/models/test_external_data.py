"""External data in every place a tensor can hide: taken in, or refused with nothing stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from backend.errors import UserError
from backend.models.ingest import ingest_file
from backend.models.inspect import all_tensors, check_self_contained, refers_to_external_data
from storage.artifacts import ArtifactStore
from storage.repo import models as model_store
from tests import hostile
from tests.backend.models.test_ingest import assert_nothing_stored, reject

PLACES = list(hostile.EXTERNAL_PLACES.items())
# onnx.load(load_external_data=True) takes these in; the rest must be refused after loading.
TAKEN_IN = {
    "initializer",
    "Constant attribute",
    "If subgraph",
    "model-local function",
    "TENSORS attribute",
}


@pytest.mark.parametrize(("place", "build"), PLACES, ids=[p for p, _ in PLACES])
def test_walker_finds_the_external_tensor_in_every_place(
    place: str, build: Callable[[str], onnx.ModelProto]
) -> None:
    found = [where for where, t in all_tensors(build("weights.bin")) if refers_to_external_data(t)]
    assert len(found) == 1, place
    with pytest.raises(UserError, match=r"still refers to external data 'weights.bin'"):
        check_self_contained(build("weights.bin"), "m.onnx")


@pytest.mark.parametrize(("place", "build"), PLACES, ids=[p for p, _ in PLACES])
def test_single_onnx_with_external_data_anywhere_is_refused(
    data_dir: Path, tmp_path: Path, place: str, build: Callable[[str], onnx.ModelProto]
) -> None:
    path = hostile.save_model(build("weights.bin"), tmp_path / "model.onnx")
    reject(path, "model.onnx", "external data", data_dir)


@pytest.mark.parametrize(("place", "build"), PLACES, ids=[p for p, _ in PLACES])
def test_zipped_external_data_is_taken_in_or_refused(
    data_dir: Path, tmp_path: Path, place: str, build: Callable[[str], onnx.ModelProto]
) -> None:
    archive = hostile.zip_model_with_data(build("weights.bin"), tmp_path / "m.zip")
    if place not in TAKEN_IN:
        reject(archive, "m.zip", rf"\({'the main graph, sparse'}.*still refers", data_dir)
        return
    row = ingest_file(archive, "m.zip")
    converted = model_store.model_file(row.id)
    stored = onnx.load(str(ArtifactStore().path_for(converted.sha256)), load_external_data=False)
    assert not [w for w, t in all_tensors(stored) if refers_to_external_data(t)]


@pytest.mark.parametrize(
    "build", [hostile.external_in_initializer, hostile.external_in_function], ids=["graph", "fn"]
)
def test_onnx_runtime_memory_address_marker_is_refused(
    data_dir: Path, tmp_path: Path, build: Callable[[str], onnx.ModelProto]
) -> None:
    model = build(hostile.ORT_MEMORY_MARKER)
    single = hostile.save_model(model, tmp_path / "model.onnx")
    reject(single, "model.onnx", "points at a memory address", data_dir)
    archive = hostile.zip_model_with_data(model, tmp_path / "m.zip", data_name="")
    reject(archive, "m.zip", "points at a memory address", data_dir)


def test_function_tensor_pointing_outside_the_zip_is_refused(
    data_dir: Path, tmp_path: Path
) -> None:
    archive = hostile.external_data_outside_zip(tmp_path / "outside.zip")
    reject(
        archive, "outside.zip", "refers to external data '../../../../etc/passwd' outside", data_dir
    )


def test_refused_uploads_leave_no_scratch(data_dir: Path, tmp_path: Path) -> None:
    archive = hostile.zip_model_with_data(
        hostile.external_in_sparse_initializer(), tmp_path / "sparse.zip"
    )
    with pytest.raises(UserError):
        ingest_file(archive, "sparse.zip")
    assert_nothing_stored(data_dir)
