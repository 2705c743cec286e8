"""Deleting a model removes what was made from it outside the artifact store (named in
backend/models/derived.py): its generative folders, and the weightless viewer copy of a blob once
no other model keeps that blob."""

from __future__ import annotations

from pathlib import Path

from backend.models import derived, library
from storage.repo import models as model_store
from tests.storage.rows import INPUTS


def _model_of(sha256: str, name: str) -> model_store.ModelRow:
    return model_store.create_model(
        name=name,
        sha256=sha256,
        format="onnx",
        size_bytes=10,
        metadata={"opset": 17, "inputs": INPUTS},
        artifacts=[model_store.NewArtifact("original", sha256, 10, "m.onnx")],
    )


def test_deleting_a_model_removes_its_folders_and_the_copy_of_a_blob_nobody_keeps(
    data_dir: Path,
) -> None:
    blob = library.store().put_bytes(b"0123456789")
    first, second = _model_of(blob.sha256, "first"), _model_of(blob.sha256, "second")
    folders = {
        model.id: [derived.genai_path(model, suffix) for suffix in ("", "-hf", "-openvino-fp32")]
        for model in (first, second)
    }
    for folder in folders[first.id] + folders[second.id]:
        folder.mkdir(parents=True)
        (folder / "model.onnx").write_bytes(b"x")
    copy = derived.skeleton_path(blob.sha256)
    copy.parent.mkdir(parents=True)
    copy.write_bytes(b"weightless")
    assert copy.parent.is_relative_to(data_dir) and folders[first.id][0].is_relative_to(data_dir)

    library.delete_model(first.id)
    assert not any(folder.exists() for folder in folders[first.id])
    assert all(folder.is_dir() for folder in folders[second.id])  # another model's: kept
    assert copy.is_file()  # the second model still holds the blob

    library.delete_model(second.id)
    assert not any(folder.exists() for folder in folders[second.id])
    assert not library.store().exists(blob.sha256) and not copy.exists()
