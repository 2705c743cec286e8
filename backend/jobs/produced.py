"""Files a configuration produced (built graphs, profiles) copied into the artifact store."""

from __future__ import annotations

from pathlib import Path

from backend.results import ConfigurationResult
from storage.artifacts import ArtifactStore
from storage.repo.models import NewArtifact


def store_produced_files(
    store: ArtifactStore, job_id: int, result: ConfigurationResult
) -> tuple[list[Path], list[NewArtifact]]:
    """Put each produced file in the store; the files (kept until the result is written)
    and the links to write with the result."""
    produced_paths: list[Path] = []
    links: list[NewArtifact] = []
    produced_files = (("optimized_path", ""), ("ort_optimized_path", ".ort"))
    for key, suffix in (*produced_files, ("profile_path", ".profile")):
        produced = result.environment.pop(key, None)
        if not produced or not Path(produced).is_file():
            continue
        stored = store.put_file(Path(produced))
        produced_paths.append(Path(produced))
        if not suffix:
            result.optimized_sha256 = stored.sha256
        graph = "after ONNX Runtime's optimizations" if suffix else "as built by Optiboard"
        if suffix == ".profile":
            result.telemetry["profile_sha256"] = stored.sha256
            graph = "per-node profile (separate pass, not the clean timing)"
        links.append(
            NewArtifact(
                kind="profile" if suffix == ".profile" else "optimized",
                sha256=stored.sha256,
                size_bytes=stored.size_bytes,
                filename=Path(produced).name,
                meta={"job_id": job_id, "config_key": result.config_key, "graph": graph},
            )
        )
    return produced_paths, links
