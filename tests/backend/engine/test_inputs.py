"""Concrete shapes, random feeds and calibration files, on the real test models."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from backend.engine.calibration import check_calibration
from backend.engine.inputs import (
    DEFAULT_INT_RANGE,
    concrete_shape,
    input_specs_of,
    load_calibration_npz,
    random_inputs,
    read_calibration_npz,
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


def test_good_calibration_npz_splits_into_batch_one_feeds(tmp_path: Path, cnn_path: Path) -> None:
    path = tmp_path / "calib.npz"
    np.savez(path, input=np.random.default_rng(0).normal(size=(5, 3, 32, 32)))  # float64
    specs = input_specs_of(cnn_path)
    calibration = read_calibration_npz(path, specs, {})
    assert len(calibration.feeds) == 5
    assert calibration.feeds[2]["input"].shape == (1, 3, 32, 32)
    assert calibration.feeds[2]["input"].dtype == np.float32
    assert calibration.notes == ["calibration array 'input' cast from float64 to float32"]
    assert len(load_calibration_npz(path, specs, {})) == 5


def test_calibration_npz_with_wrong_keys_lists_the_expected_names(
    tmp_path: Path, cnn_path: Path
) -> None:
    path = tmp_path / "calib.npz"
    np.savez(path, images=np.zeros((2, 3, 32, 32), np.float32))
    with pytest.raises(UserError, match="named images, but the model's inputs are input"):
        load_calibration_npz(path, input_specs_of(cnn_path), {})


def test_calibration_npz_with_object_array_is_refused_without_unpickling(
    tmp_path: Path, cnn_path: Path
) -> None:
    path = tmp_path / "calib.npz"
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = np.zeros(3), np.zeros(4)
    np.savez(path, input=ragged)
    with pytest.raises(UserError, match="object array"):
        load_calibration_npz(path, input_specs_of(cnn_path), {})


def test_calibration_npz_with_wrong_rank_or_size_is_refused(
    tmp_path: Path, cnn_path: Path, transformer_path: Path
) -> None:
    path = tmp_path / "calib.npz"
    np.savez(path, input=np.zeros((2, 3, 32), np.float32))
    with pytest.raises(UserError, match="has 3 dimensions, but input 'input' has 4"):
        load_calibration_npz(path, input_specs_of(cnn_path), {})
    np.savez(path, input=np.zeros((2, 3, 16, 16), np.float32))
    with pytest.raises(UserError, match="size 16 on axis 2, but the input needs 32"):
        load_calibration_npz(path, input_specs_of(cnn_path), {})
    np.savez(path, tokens=np.zeros((2, 8), np.int32))
    with pytest.raises(UserError, match="size 8 on axis 1, but the input needs 16"):
        load_calibration_npz(path, input_specs_of(transformer_path), {"seq": 16})


def test_calibration_float_for_integer_input_is_refused(
    tmp_path: Path, transformer_path: Path
) -> None:
    path = tmp_path / "calib.npz"
    np.savez(path, tokens=np.zeros((2, 8), np.float32))
    with pytest.raises(UserError, match="dtype float32, but input 'tokens' takes int64"):
        load_calibration_npz(path, input_specs_of(transformer_path), {"seq": 8})


def test_file_that_is_not_an_npz_is_refused(tmp_path: Path, cnn_path: Path) -> None:
    path = tmp_path / "calib.npz"
    path.write_bytes(b"not numpy at all")
    with pytest.raises(UserError, match="not a readable .npz"):
        load_calibration_npz(path, input_specs_of(cnn_path), {})


BOMB_SHAPE = (2048, 1, 256, 256)  # 512 MiB of float32


def _npz_declaring(path: Path, shape: tuple[int, ...], data_bytes: int, compress: bool) -> Path:
    """An .npz whose 'input' header declares `shape` (float32), followed by data_bytes of zeros,
    written in 1 MB pieces so the test itself never holds the array."""
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as archive:
        with archive.open("input.npy", "w", force_zip64=True) as member:
            header = {"descr": "<f4", "fortran_order": False, "shape": shape}
            np.lib.format.write_array_header_1_0(member, header)
            chunk = bytes(MB)
            for start in range(0, data_bytes, MB):
                member.write(chunk[: min(MB, data_bytes - start)])
    return path


def test_npz_that_declares_far_more_than_it_holds_is_refused_in_a_child(
    tmp_path: Path, cnn_path: Path
) -> None:
    bomb = _npz_declaring(tmp_path / "bomb.npz", BOMB_SHAPE, 512 * MB, compress=True)
    assert bomb.stat().st_size < MB
    before = rss_bytes()

    with pytest.raises(UserError) as refused:
        check_calibration(bomb, input_specs_of(cnn_path), {})

    assert str(refused.value).startswith(
        "Array 'input' in bomb.npz declares 512.0 MB in 0.50 MB of file, more than the "
        "compression limit of 200:1 allows"
    )
    assert rss_bytes() - before < 100 * MB


def test_npz_whose_header_overstates_its_data_is_refused_before_loading(
    tmp_path: Path, cnn_path: Path
) -> None:
    liar = _npz_declaring(tmp_path / "liar.npz", BOMB_SHAPE, 4096, compress=False)
    before = rss_bytes()

    with pytest.raises(UserError, match=r"declares shape \[2048, 1, 256, 256\] \(512.0 MB\) but"):
        read_calibration_npz(liar, input_specs_of(cnn_path), {})

    assert rss_bytes() - before < 100 * MB


def test_npz_over_the_input_limit_is_refused(
    tmp_path: Path, cnn_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_MAX_INPUT_MB", "1")
    path = tmp_path / "calib.npz"
    np.savez(path, input=np.random.default_rng(0).normal(size=(128, 3, 32, 32)).astype(np.float32))

    with pytest.raises(UserError, match=r"declares 2 MB of arrays, over the input limit of 1 MB"):
        check_calibration(path, input_specs_of(cnn_path), {})


def test_good_calibration_npz_is_checked_in_a_child(tmp_path: Path, cnn_path: Path) -> None:
    path = tmp_path / "calib.npz"
    np.savez(path, input=np.random.default_rng(0).normal(size=(3, 3, 32, 32)))

    checked = check_calibration(path, input_specs_of(cnn_path), {})

    assert checked == {
        "samples": 3,
        "notes": ["calibration array 'input' cast from float64 to float32"],
    }


def test_huge_symbolic_dim_is_refused_before_allocating(transformer_path: Path) -> None:
    specs = input_specs_of(transformer_path)
    before = rss_bytes()

    with pytest.raises(UserError, match=r"over the input limit of 2048 MB \(OPTIBOARD_MAX_INPUT"):
        random_inputs(specs, 8, {"seq": 10**9})

    assert rss_bytes() - before < 100 * MB
