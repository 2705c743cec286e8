"""Content-addressed artifact store: files named by sha256, written to a temp name then renamed.

One blob can be referenced by several rows (the same content stored twice is stored once), so a
blob is removed only when no row references it, and that check must not interleave with a writer
whose reference is about to be committed. `locked` gives that order: a writer holds the digest's
lock from putting the blob until its row is committed (re-putting the blob if a remover got there
first), and a remover holds it while it checks the rows and deletes. Every copy into the store
takes the lock for its rename (`put_file`, `put_bytes`); an upload that links what it copied uses
`putting`, which keeps the locks until its rows are committed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from settings import data_dir

CHUNK = 1 << 20
_held = threading.local()  # lock files this thread holds, so `locked` can nest


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
    created: bool = False  # this call put the blob there (it was not in the store before)


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
        tmp, sha256 = self._copy_in(Path(source))
        try:
            with self.locked([sha256]):
                return self._commit(tmp, sha256)
        finally:
            tmp.unlink(missing_ok=True)

    def put_bytes(self, data: bytes) -> StoredFile:
        fd, tmp_name = tempfile.mkstemp(dir=self.root, prefix=".incoming-")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            sha256 = hashlib.sha256(data).hexdigest()
            with self.locked([sha256]):
                return self._commit(tmp, sha256)
        finally:
            tmp.unlink(missing_ok=True)

    @contextmanager
    def putting(self, sources: Sequence[Path]) -> Iterator[list[StoredFile]]:
        """Copy files in and hold their digests' locks until the block ends.

        The block commits the rows that reference the blobs, as its last step, so no remover
        (a refused result write, a model deletion) can check "is it referenced?" between the
        copy and the commit. If the block raises, the blobs this call created are deleted while
        still locked: no other writer can have linked them meanwhile, and this needs no database
        (the failure may be the database). Copies are made before the locks are taken, so a long
        upload blocks nobody; all locks are taken at once, in order (no deadlock).
        """
        staged: list[tuple[Path, str]] = []
        try:
            for source in sources:
                staged.append(self._copy_in(Path(source)))
            with self.locked(sha256 for _, sha256 in staged):
                stored = [self._commit(tmp, sha256) for tmp, sha256 in staged]
                try:
                    yield stored
                except BaseException:
                    for blob in stored:
                        if blob.created:
                            self.delete(blob.sha256)
                    raise
        finally:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)

    def _copy_in(self, source: Path) -> tuple[Path, str]:
        """A synced temporary copy inside the store and its sha256 (not yet a blob)."""
        digest = hashlib.sha256()
        fd, tmp_name = tempfile.mkstemp(dir=self.root, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
                while chunk := src.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return Path(tmp_name), digest.hexdigest()

    def _commit(self, tmp: Path, sha256: str) -> StoredFile:
        """Rename a temporary copy into place; the caller holds the digest's lock."""
        final = self.path_for(sha256)
        final.parent.mkdir(parents=True, exist_ok=True)
        created = not final.exists()
        if created:
            os.replace(tmp, final)
        else:
            tmp.unlink(missing_ok=True)
        return StoredFile(sha256, final.stat().st_size, final, created)

    def delete(self, sha256: str) -> None:
        """Remove a blob; the caller holds its lock and knows no committed row references it."""
        self.path_for(sha256).unlink(missing_ok=True)

    @contextmanager
    def locked(self, digests: Iterable[str]) -> Iterator[None]:
        """Hold the locks of these digests (flock, one of 256 stripes by the first two hex
        digits, taken in order so two holders cannot deadlock); nests within one thread."""
        held: set[Path] = _held.__dict__.setdefault("paths", set())
        folder = self.root / ".locks"
        folder.mkdir(exist_ok=True)
        wanted = sorted({folder / self.path_for(d).parent.name for d in digests} - held)
        with ExitStack() as stack:
            for path in wanted:
                handle = stack.enter_context(open(path, "a+b"))
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                held.add(path)
                stack.callback(held.discard, path)
            yield
