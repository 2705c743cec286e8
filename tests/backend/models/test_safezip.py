"""Hostile zips against the real extractor: each refused with one sentence and nothing written."""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from backend.errors import UserError
from backend.models.safezip import MB, ZipLimits, extract_zip
from backend.models.zipdir import check_layout, read_directory
from tests import hostile
from tests.backend.models.test_ingest import reject

HOSTILE: list[tuple[str, Callable[[Path], Path], str]] = [
    ("overlapping", hostile.overlapping_zip, r"'m00000.bin' and 'm00001.bin' overlap"),
    ("huge directory", hostile.huge_directory_zip, "holds 200000 entries, more than the limit"),
    ("zip64 count lie", hostile.zip64_count_lie_zip, "directory holds more than 10000 entries"),
    ("zip64 locator lie", hostile.zip64_locator_lie_zip, "ZIP64 locator points past"),
    ("zip64 size lie", hostile.zip64_size_lie_zip, "'model.data' expands .* zip bomb"),
    ("directory offset lie", hostile.directory_offset_lie_zip, "directory claims .* past the"),
    ("long names", hostile.long_names_zip, "has a 60000-byte name"),
    ("zip bomb", hostile.zip_bomb, "'model.onnx' expands 10.. times"),
    ("traversal", hostile.traversal_zip, "'../../evil.onnx' points outside the archive"),
    ("absolute path", hostile.absolute_path_zip, "'/tmp/evil.onnx' has an absolute path"),
    ("symlink", hostile.symlink_zip, "'model.onnx' is a symbolic link"),
]


def one_sentence(message: str) -> bool:
    """What is wrong; what to do: one sentence with one ';' turn and a full stop at the end."""
    return message.endswith(".") and ";" in message and "\n" not in message


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile")
    return {name: build(folder / f"{name.replace(' ', '_')}.zip") for name, build, _ in HOSTILE}


@pytest.mark.parametrize(("name", "message"), [(n, m) for n, _, m in HOSTILE])
def test_hostile_zip_is_refused_before_anything_is_written(
    built: dict[str, Path], tmp_path: Path, name: str, message: str
) -> None:
    scratch = tmp_path / "scratch"
    with pytest.raises(UserError, match=message) as caught:
        extract_zip(built[name], parent=scratch)
    assert one_sentence(str(caught.value)), str(caught.value)
    assert not scratch.exists() or not any(scratch.iterdir())


@pytest.mark.parametrize("name", ["overlapping", "huge directory", "zip64 count lie"])
def test_hostile_upload_stores_nothing(
    built: dict[str, Path], data_dir: Path, tmp_path: Path, name: str
) -> None:
    upload = shutil.copy(built[name], tmp_path / "upload.zip")
    reject(Path(upload), "upload.zip", "zip", data_dir)


def test_overlapping_zip_is_small_and_declares_gigabytes(built: dict[str, Path]) -> None:
    """The builder makes what the issue describes: < 1 MB, 8000 entries, valid to zipfile."""
    archive = built["overlapping"]
    assert archive.stat().st_size < MB
    with zipfile.ZipFile(archive) as handle:
        members = handle.infolist()
        assert len(members) == 8000
        assert sum(m.file_size for m in members) > 8 * 2**30
        assert handle.read(members[-2]).endswith(bytes(1024))  # CRCs check out


def test_directory_is_counted_from_the_end_record_without_walking_it(
    built: dict[str, Path],
) -> None:
    with pytest.raises(UserError, match="holds 200000 entries"):
        read_directory(built["huge directory"], max_members=10_000)


def test_ordinary_zip_is_extracted(tmp_path: Path) -> None:
    source = tmp_path / "ok.zip"
    with zipfile.ZipFile(source, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("export/model.onnx", b"onnx bytes")
        archive.writestr("export/weights/w.bin", bytes(range(256)) * 64)
        archive.writestr("export/empty/", b"")
    folder = extract_zip(source, parent=tmp_path / "scratch")
    assert (folder / "export/model.onnx").read_bytes() == b"onnx bytes"
    assert (folder / "export/weights/w.bin").stat().st_size == 256 * 64
    assert (folder / "export/empty").is_dir()


def test_zip_with_prepended_bytes_is_still_read(tmp_path: Path) -> None:
    """Self-extracting archives carry a program before the zip; offsets shift, nothing overlaps."""
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as archive:
        archive.writestr("a.txt", b"a")
        archive.writestr("b.txt", b"b")
    prefixed = tmp_path / "sfx.zip"
    prefixed.write_bytes(b"#!/bin/sh\nexit 0\n" + plain.read_bytes())
    folder = extract_zip(prefixed, parent=tmp_path / "scratch")
    assert (folder / "b.txt").read_bytes() == b"b"


def test_declared_sizes_past_the_cap_are_refused(tmp_path: Path) -> None:
    archive = hostile.declared_total_zip(tmp_path / "parts.zip", members=12)
    limits = ZipLimits(max_total_bytes=8 * MB)
    with pytest.raises(UserError, match="would unpack to 12.0 MB, more than the limit of 8 MB"):
        extract_zip(archive, limits, parent=tmp_path / "scratch")
    assert not (tmp_path / "scratch").exists()


def test_disk_quota_counts_uploads_already_being_unpacked(tmp_path: Path) -> None:
    quota_root = tmp_path / "tmp"
    other = quota_root / "ingest-other"
    other.mkdir(parents=True)
    (other / "big.bin").write_bytes(bytes(5 * MB))
    archive = hostile.declared_total_zip(tmp_path / "parts.zip", members=4)
    limits = ZipLimits(disk_quota_bytes=8 * MB)
    with pytest.raises(UserError, match="only 3 MB of the 8 MB upload disk quota is free"):
        extract_zip(archive, limits, parent=quota_root / "ingest-this", quota_root=quota_root)
    assert sorted(p.name for p in quota_root.iterdir()) == ["ingest-other"]
    shutil.rmtree(other)
    folder = extract_zip(archive, limits, parent=quota_root / "ingest-this", quota_root=quota_root)
    assert len(list(folder.iterdir())) == 4


def test_zip_that_would_leave_too_little_free_disk_is_refused(tmp_path: Path) -> None:
    archive = hostile.declared_total_zip(tmp_path / "parts.zip", members=2)
    free = shutil.disk_usage(tmp_path).free
    limits = ZipLimits(min_free_bytes=free - MB)  # 2 MB to write, 1 MB above the floor
    with pytest.raises(UserError, match=r"leave less than \d+ MB free on the data disk"):
        extract_zip(archive, limits, parent=tmp_path / "scratch")
    assert not (tmp_path / "scratch").exists()


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    archive = tmp_path / "dup.zip"
    with pytest.warns(UserWarning), zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("model.onnx", b"a")
        handle.writestr("model.onnx", b"b")
    with pytest.raises(UserError, match="holds 'model.onnx' twice"):
        extract_zip(archive, parent=tmp_path / "scratch")


def test_standard_zip64_end_records_are_read(tmp_path: Path) -> None:
    """More than 65535 entries make zipfile write ZIP64 end records; an honest one passes."""
    archive = tmp_path / "z64.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for i in range(0x10000 + 10):
            handle.writestr(f"f{i}", b"x")
    directory = read_directory(archive, max_members=70_000)
    assert directory.entries == 0x10000 + 10
    with zipfile.ZipFile(archive) as handle:
        check_layout(archive, handle.infolist(), directory)
    with pytest.raises(UserError, match="holds 65546 entries, more than the limit of 10000"):
        extract_zip(archive, parent=tmp_path / "scratch")
