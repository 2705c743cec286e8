from pathlib import Path

import pytest

from storage.artifacts import ArtifactStore, sha256_file


def _files(root: Path) -> list[Path]:
    """Blobs and leftovers, not the lock files under .locks/."""
    return [p for p in root.rglob("*") if p.is_file() and ".locks" not in p.parts]


def test_same_content_is_stored_once_under_its_sha256(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "blobs")
    source = tmp_path / "a.bin"
    source.write_bytes(b"model bytes" * 1000)
    first = store.put_file(source)
    second = store.put_bytes(source.read_bytes())
    assert first.sha256 == second.sha256 == sha256_file(source)
    assert first.path.name == first.sha256 and first.path.parent.name == first.sha256[:2]
    assert _files(tmp_path / "blobs") == [first.path]
    assert (first.created, second.created) == (True, False)


def test_failed_copy_leaves_no_partial_file(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "blobs")
    with pytest.raises(FileNotFoundError):
        store.put_file(tmp_path / "missing.onnx")
    assert _files(tmp_path / "blobs") == []


def test_path_for_rejects_anything_but_a_digest(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    with pytest.raises(ValueError):
        store.path_for("../../etc/passwd")
