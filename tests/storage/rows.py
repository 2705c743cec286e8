"""Rows the storage and queue tests start from, made through the repository as the app does."""

from __future__ import annotations

from storage.repo import models as model_store

INPUTS = [{"name": "x", "dtype": "float32", "shape": ["N", 4]}]


def model_row(name: str = "m") -> model_store.ModelRow:
    """A model row with one original artifact (a 10-byte m.onnx); no file is stored."""
    return model_store.create_model(
        name=name,
        sha256="a" * 64,
        format="onnx",
        size_bytes=10,
        metadata={"opset": 17, "inputs": INPUTS},
        artifacts=[model_store.NewArtifact("original", "a" * 64, 10, "m.onnx")],
    )
