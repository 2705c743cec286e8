"""Feeds from a user's .npz: checked from its headers first, never unpickled, split per sample."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from backend.engine.calibration import check_calibration
from backend.engine.inputs import input_specs_of
from backend.engine.npzfeeds import load_calibration_npz, read_calibration_npz
from backend.errors import UserError
from tests.rss import MB, rss_bytes


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
        check_calibration(bomb, cnn_path, {})

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
        check_calibration(path, cnn_path, {})


def test_good_calibration_npz_is_checked_in_a_child(tmp_path: Path, cnn_path: Path) -> None:
    path = tmp_path / "calib.npz"
    np.savez(path, input=np.random.default_rng(0).normal(size=(3, 3, 32, 32)))

    checked = check_calibration(path, cnn_path, {})

    assert checked == {
        "samples": 3,
        "notes": ["calibration array 'input' cast from float64 to float32"],
    }
