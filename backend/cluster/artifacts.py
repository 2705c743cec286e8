"""Files between head and nodes without a shared filesystem: by content hash, through Ray.

The head puts a model into Ray's object store once per sweep, in chunks (a big model never has
to fit in one object or in one process's memory at once). A node fetches the chunks one at a time
into its own cache folder keyed by sha256, checks the hash before the file becomes visible
(atomic rename), and reuses it for every later configuration of that model. Files a measurement
produces (the optimized variant, ORT's graph, a profile) travel back inside the task's return
value with their sha256, checked again on the head before they enter the artifact store.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import settings
from backend.launch.folders import owned_file
from backend.results import PRODUCED_KEYS

CHUNK_BYTES = 32 << 20


class HashMismatch(RuntimeError):
    """What arrived is not what was sent; the cached copy is not kept."""


@dataclass(frozen=True)
class ShippedFile:
    """A file in the object store: its refs are nested, so Ray passes them unresolved."""

    sha256: str
    size_bytes: int
    chunks: tuple[Any, ...]  # ray.ObjectRef, one per CHUNK_BYTES


def ship(path: Path, sha256: str) -> ShippedFile:
    """Put the file into the object store chunk by chunk (done once per sweep, on the head)."""
    import ray

    chunks = []
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            chunks.append(ray.put(chunk))
    return ShippedFile(sha256=sha256, size_bytes=path.stat().st_size, chunks=tuple(chunks))


def cache_root() -> Path:
    configured = settings.CLUSTER_CACHE_DIR.get()
    default = Path(tempfile.gettempdir()) / "optiboard-cluster-cache"
    root = Path(configured) if configured else default
    root.mkdir(parents=True, exist_ok=True)
    return root


def fetch(shipped: ShippedFile, root: Path | None = None) -> Path:
    """This node's copy of the file, fetched and checked on first use; the path to read."""
    import ray

    root = root or cache_root()
    final = root / shipped.sha256[:2] / shipped.sha256
    if final.is_file():  # only ever renamed into place after its hash was checked
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    # a copy that a killed task left half written goes when the next one starts here
    with owned_file(final.parent, ".incoming-") as (out, tmp):
        for ref in shipped.chunks:
            chunk = ray.get(ref)
            digest.update(chunk)
            out.write(chunk)
        out.flush()
        if digest.hexdigest() != shipped.sha256:
            raise HashMismatch(
                f"model arrived with sha256 {digest.hexdigest()}, expected {shipped.sha256}"
            )
        os.replace(tmp, final)  # two tasks of one node may race here: same content either way
    return final


@dataclass(frozen=True)
class FileBlob:
    """A file produced on a node, carried back in the task's return value."""

    key: str  # which environment entry named it (optimized_path, profile_path, ...)
    name: str
    sha256: str
    data: bytes


def pack_outputs(environment: dict[str, Any]) -> list[FileBlob]:
    """Take the produced files out of a result's environment (their node paths mean nothing
    to the head)."""
    blobs = []
    for key in PRODUCED_KEYS:
        produced = environment.pop(key, None)
        if produced and Path(produced).is_file():
            data = Path(produced).read_bytes()
            blobs.append(FileBlob(key, Path(produced).name, hashlib.sha256(data).hexdigest(), data))
    return blobs


def unpack_outputs(blobs: list[FileBlob], environment: dict[str, Any], folder: Path) -> None:
    """Write the files on the head, checked, and name them in the environment again, so the
    worker's own artifact step stores them exactly as it stores local ones."""
    for blob in blobs:
        if hashlib.sha256(blob.data).hexdigest() != blob.sha256:
            raise HashMismatch(f"{blob.name} changed on its way back from the node")
        path = folder / blob.name
        path.write_bytes(blob.data)
        environment[blob.key] = str(path)
