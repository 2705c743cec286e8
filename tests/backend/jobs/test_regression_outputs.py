"""A regression side's outputs .npz is loaded whole by the worker to compare the two sides: it is
taken only from the side's folder and only when its headers do not lie. Until 2026-12-07 a side
the model took over could have the worker inflate a deflated member of any size (its file limit
is 8 GB) or load arrays whose headers disagree with their bytes."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from backend.engine.side import read_outputs
from backend.jobs.regression import checked_outputs
from backend.launch.dialog import DialogFailed


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_a_sides_own_outputs_are_taken_and_read(tmp_path: Path) -> None:
    path = tmp_path / "outputs.npz"
    np.savez(path, s0_o0=np.arange(6, dtype=np.float32), s1_o0=np.ones(6, np.float32))
    assert checked_outputs(tmp_path, path) == path.resolve()
    assert [len(sample) for sample in read_outputs(path)] == [1, 1]


def test_a_deflated_member_past_the_compression_limit_is_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "outputs.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:  # 64 MB of zeros in ~64 KB
        archive.writestr("s0_o0.npy", npy(np.zeros(16 * 1024 * 1024, np.float32)))
    with pytest.raises(DialogFailed, match=r"outputs were not read: .*compression limit"):
        checked_outputs(tmp_path, path)


def test_a_header_that_declares_more_than_the_member_holds_is_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "outputs.npz"
    lying = npy(np.zeros(4, np.float32)).replace(b"(4,)", b"(9999999,)".ljust(4))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("s0_o0.npy", lying)
    with pytest.raises(DialogFailed, match=r"declares shape \[9999999\]"):
        checked_outputs(tmp_path, path)


def test_an_object_array_or_a_file_outside_the_folder_is_refused(tmp_path: Path) -> None:
    side = tmp_path / "a"
    side.mkdir()
    objects = side / "outputs.npz"
    np.savez(objects, s0_o0=np.array([{"x": 1}], dtype=object))
    with pytest.raises(DialogFailed, match="object array"):
        checked_outputs(side, objects)
    elsewhere = tmp_path / "outputs.npz"
    np.savez(elsewhere, s0_o0=np.ones(2, np.float32))
    with pytest.raises(DialogFailed, match="outside its folder"):
        checked_outputs(side, elsewhere)
