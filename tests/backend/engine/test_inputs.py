"""Concrete shapes and random feeds, on the real test models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from backend.engine.inputs import (
    DEFAULT_INT_RANGE,
    concrete_shape,
    input_specs_of,
    random_inputs,
    value_ranges,
)
from backend.errors import UserError
from tests.rss import MB, rss_bytes


def test_symbolic_first_dim_becomes_the_batch_and_named_dims_get_their_values() -> None:
    assert concrete_shape(["batch", "seq"], 4, {"seq": 16}, "tokens") == (4, 16)
    assert concrete_shape([None, 3, 32, 32], 2, {}, "input") == (2, 3, 32, 32)


def test_missing_symbolic_dim_names_the_input_and_the_dim() -> None:
    with pytest.raises(UserError, match=r"Input 'tokens' has a symbolic dimension 'seq'.*seq=128"):
        concrete_shape(["batch", "seq"], 1, {}, "tokens")


def test_fixed_batch_that_differs_from_batch_size_is_explained() -> None:
    assert concrete_shape([8, 16], 1, {}, "x") == (8, 16)
    assert concrete_shape([8, 16], 8, {}, "x") == (8, 16)
    with pytest.raises(UserError, match="fixed batch of 8"):
        concrete_shape([8, 16], 4, {}, "x")


def test_input_specs_list_real_inputs_with_numpy_dtypes(transformer_path: Path) -> None:
    assert input_specs_of(transformer_path) == [
        {"name": "tokens", "dtype": "int64", "shape": ["batch", "seq"]}
    ]


def test_token_ids_stay_inside_the_embedding_table(transformer_path: Path) -> None:
    ranges = value_ranges(transformer_path)
    assert ranges == {"tokens": (0, 50)}  # make_transformer's vocab
    specs = input_specs_of(transformer_path)
    feeds = random_inputs(specs, 2, {"seq": 64}, count=3, ranges=ranges)
    tokens = np.concatenate([f["tokens"] for f in feeds])
    assert tokens.dtype == np.int64 and tokens.shape == (6, 64)
    assert tokens.min() >= 0 and tokens.max() < 50 and tokens.max() > DEFAULT_INT_RANGE[1]
    session = ort.InferenceSession(str(transformer_path), providers=["CPUExecutionProvider"])
    (hidden,) = session.run(None, feeds[0])
    assert hidden.shape == (2, 64, 32) and np.isfinite(hidden).all()


def test_random_float_inputs_are_standard_normal_and_seeded(cnn_path: Path) -> None:
    specs = input_specs_of(cnn_path)
    first = random_inputs(specs, 4, {}, count=2, seed=7)
    again = random_inputs(specs, 4, {}, count=2, seed=7)
    image = first[0]["input"]
    assert image.dtype == np.float32 and image.shape == (4, 3, 32, 32)
    assert abs(float(image.mean())) < 0.1 and abs(float(image.std()) - 1) < 0.1
    np.testing.assert_array_equal(first[1]["input"], again[1]["input"])
    assert not np.array_equal(first[0]["input"], first[1]["input"])


def test_huge_symbolic_dim_is_refused_before_allocating(transformer_path: Path) -> None:
    specs = input_specs_of(transformer_path)
    before = rss_bytes()

    with pytest.raises(UserError, match=r"over the input limit of 2048 MB \(OPTIBOARD_MAX_INPUT"):
        random_inputs(specs, 8, {"seq": 10**9})

    assert rss_bytes() - before < 100 * MB
