"""A blob is removed only when no row references it, and never while a writer links it."""

from __future__ import annotations

import threading
from pathlib import Path

from storage.artifacts import ArtifactStore
from storage.repo import models as model_store
from tests.flocks import someone_waits_on, wait_until
from tests.storage.rows import model_row


def test_a_remover_waits_for_the_writer_and_keeps_the_blob_it_linked(data_dir: Path) -> None:
    model = model_row()
    store = ArtifactStore()
    blob = store.put_bytes(b"an optimized model")
    removed: list[set[str]] = []
    remover = threading.Thread(
        target=lambda: removed.append(model_store.remove_unreferenced(store, [blob.sha256]))
    )

    with store.locked([blob.sha256]):  # the writer: blob in place, its link not yet committed
        remover.start()
        lock_file = store.root / ".locks" / blob.sha256[:2]
        wait_until(lambda: someone_waits_on(lock_file), "the remover waiting for the lock")
        link = model_store.NewArtifact("optimized", blob.sha256, blob.size_bytes, "m.opt.onnx")
        model_store.add_artifact(model.id, link)
    remover.join(timeout=30)

    assert removed == [set()] and store.exists(blob.sha256)
    orphan = store.put_bytes(b"nobody links this")
    assert model_store.remove_unreferenced(store, [orphan.sha256]) == {orphan.sha256}
    assert not store.exists(orphan.sha256) and store.exists(blob.sha256)
