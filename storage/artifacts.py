"""Content-addressed artifact store: files named by sha256, written to a temp name then renamed."""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from storage.db import data_dir

CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class StoredFile:
    sha256: str
    size_bytes: int
    path: Path


class ArtifactStore:
    """Blobs live at root/ab/abcdef...; the same content is stored once."""

    def __init__(self, root: Path | str | None = None) -> None:
        if root is None:
            root = data_dir() / "artifacts"
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path_for(self, sha256: str) -> Path:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError(f"not a sha256 digest: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def exists(self, sha256: str) -> bool:
        return self.path_for(sha256).is_file()

    def put_file(self, source: Path | str) -> StoredFile:
        """Copy a file in; the rename is atomic so a crash never leaves a half-written blob."""
        source = Path(source)
        digest = hashlib.sha256()
        fd, tmp_name = tempfile.mkstemp(dir=self.root, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
                while chunk := src.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            return self._commit(Path(tmp_name), digest.hexdigest())
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise

    def put_bytes(self, data: bytes) -> StoredFile:
        fd, tmp_name = tempfile.mkstemp(dir=self.root, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            return self._commit(Path(tmp_name), hashlib.sha256(data).hexdigest())
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise

    def _commit(self, tmp: Path, sha256: str) -> StoredFile:
        final = self.path_for(sha256)
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            tmp.unlink()
        else:
            os.replace(tmp, final)
        return StoredFile(sha256=sha256, size_bytes=final.stat().st_size, path=final)

    def delete(self, sha256: str) -> None:
        self.path_for(sha256).unlink(missing_ok=True)
