"""Models and their artifacts: created together, deleted together."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, select
from sqlalchemy.exc import IntegrityError

from storage.artifacts import ArtifactStore
from storage.db import session_scope
from storage.repo.rows import row_of
from storage.schema import Artifact, Job, Model
from storage.states import JobState, ModelOrigin


@dataclass(frozen=True)
class ModelRow:
    id: int
    name: str
    sha256: str
    format: str
    size_bytes: int
    opset: int | None
    ir_version: int | None
    producer: str | None
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    op_histogram: dict[str, int]
    parameter_count: int
    node_count: int
    warnings: list[str]
    created_at: datetime
    origin: str  # a ModelOrigin value: upload, copy, variant
    source_model_id: int | None  # the model it was made from; None once that is deleted
    source_job_id: int | None  # the job that made it; None for uploads, or once deleted


@dataclass(frozen=True)
class Provenance:
    """What a new model was made from: nothing (an upload), or a model and perhaps a job."""

    origin: ModelOrigin = ModelOrigin.UPLOAD
    source_model_id: int | None = None
    source_job_id: int | None = None


@dataclass(frozen=True)
class ArtifactRow:
    id: int
    model_id: int
    kind: str
    sha256: str
    size_bytes: int
    filename: str
    meta: dict[str, Any]
    created_at: datetime


@dataclass
class NewArtifact:
    """A file already in the artifact store, to be linked to a model."""

    kind: str
    sha256: str
    size_bytes: int
    filename: str
    meta: dict[str, Any] = field(default_factory=dict)

    def row(self, model_id: int) -> Artifact:
        """Its database row, linked to `model_id` (not yet added to a session)."""
        return Artifact(
            model_id=model_id,
            kind=self.kind,
            sha256=self.sha256,
            size_bytes=self.size_bytes,
            filename=self.filename,
            meta=self.meta,
        )

    def query(self, model_id: int) -> Select[tuple[Artifact]]:
        """The model's row of this content and kind, which exists at most once."""
        return select(Artifact).where(
            Artifact.model_id == model_id,
            Artifact.kind == self.kind,
            Artifact.sha256 == self.sha256,
        )


def create_model(
    *,
    name: str,
    sha256: str,
    format: str,
    size_bytes: int,
    metadata: dict[str, Any],
    artifacts: list[NewArtifact],
    provenance: Provenance = Provenance(),
) -> ModelRow:
    """Insert a model and its artifacts in one transaction (all or nothing)."""
    with session_scope() as session:
        model = Model(
            origin=provenance.origin.value,
            source_model_id=provenance.source_model_id,
            source_job_id=provenance.source_job_id,
            name=name,
            sha256=sha256,
            format=format,
            size_bytes=size_bytes,
            opset=metadata.get("opset"),
            ir_version=metadata.get("ir_version"),
            producer=metadata.get("producer"),
            inputs=metadata.get("inputs", []),
            outputs=metadata.get("outputs", []),
            op_histogram=metadata.get("op_histogram", {}),
            parameter_count=metadata.get("parameter_count", 0),
            node_count=metadata.get("node_count", 0),
            warnings=metadata.get("warnings", []),
        )
        session.add(model)
        session.flush()
        session.add_all([art.row(model.id) for art in artifacts])
        session.flush()
        return row_of(ModelRow, model)


def list_models(url: str | None = None) -> list[ModelRow]:
    with session_scope() as session:
        models = session.scalars(select(Model).order_by(Model.created_at.desc(), Model.id.desc()))
        return [row_of(ModelRow, m) for m in models]


def model_with_sha256(sha256: str) -> ModelRow | None:
    """The first model uploaded as exactly this file (models.sha256 is the upload's digest)."""
    with session_scope() as session:
        model = session.scalar(select(Model).where(Model.sha256 == sha256).order_by(Model.id))
        return row_of(ModelRow, model) if model else None


def made_from(model_id: int) -> list[ModelRow]:
    """The models made from this one (its variants and copies), oldest first."""
    with session_scope() as session:
        rows = session.scalars(
            select(Model).where(Model.source_model_id == model_id).order_by(Model.id)
        )
        return [row_of(ModelRow, m) for m in rows]


def get_model(model_id: int) -> ModelRow | None:
    with session_scope() as session:
        model = session.get(Model, model_id)
        return row_of(ModelRow, model) if model else None


class ModelInUse(Exception):
    """The model has a running job, so deleting it now would pull the job's rows from under it."""


def delete_model(model_id: int, store: ArtifactStore | None = None) -> None:
    """Delete a model with its jobs and results; blobs no other row references are removed.
    Models made from it stay, their source_model_id (and source_job_id, its job) set to NULL
    by the foreign keys.

    Refused with ModelInUse while one of its jobs runs. On PostgreSQL the model's job rows are
    locked first, so a claim in flight finishes before the check; on SQLite the conditional DELETE
    is atomic on its own.
    """
    running = select(Job.id).where(Job.model_id == model_id, Job.state == JobState.RUNNING.value)
    with session_scope() as session:
        session.execute(select(Job.id).where(Job.model_id == model_id).with_for_update())
        shas = set(session.scalars(select(Artifact.sha256).where(Artifact.model_id == model_id)))
        deleted = session.execute(
            delete(Model).where(Model.id == model_id, ~running.exists())
        ).rowcount
        if deleted == 0:
            if session.get(Model, model_id) is None:
                raise LookupError(f"no model {model_id}")
            raise ModelInUse(f"model {model_id} has a running job")
    if store is not None:
        remove_unreferenced(store, shas)


def remove_unreferenced(store: ArtifactStore, digests: Iterable[str]) -> set[str]:
    """Delete the blobs among `digests` that no artifact row references; the removed ones.

    Checked and deleted under the digests' locks (ArtifactStore.locked), so a blob whose
    reference another writer is about to commit is never deleted from under it.
    """
    digests = set(digests)
    with store.locked(digests):
        with session_scope() as session:
            used = set(session.scalars(select(Artifact.sha256).where(Artifact.sha256.in_(digests))))
        for sha in digests - used:
            store.delete(sha)
    return digests - used


def add_artifact(model_id: int, art: NewArtifact) -> ArtifactRow:
    """Link a stored file to a model; linking the same content twice returns the existing row.

    Raises LookupError when the model no longer exists (a foreign-key failure is not retried).
    """
    try:
        with session_scope() as session:
            existing = session.scalar(art.query(model_id))
            if existing is not None:
                return row_of(ArtifactRow, existing)
            row = art.row(model_id)
            session.add(row)
            session.flush()
            return row_of(ArtifactRow, row)
    except IntegrityError:
        pass  # a concurrent link of the same content won, or the model is gone: look once
    with session_scope() as session:
        existing = session.scalar(art.query(model_id))
        if existing is None:
            raise LookupError(
                f"model {model_id} no longer exists; artifact {art.filename} not linked"
            )
        return row_of(ArtifactRow, existing)


def list_artifacts(model_id: int) -> list[ArtifactRow]:
    with session_scope() as session:
        rows = session.scalars(
            select(Artifact).where(Artifact.model_id == model_id).order_by(Artifact.id)
        )
        return [row_of(ArtifactRow, a) for a in rows]


def model_file(model_id: int) -> ArtifactRow:
    """The ONNX file to optimize: the converted one for SavedModels, else the original."""
    arts = list_artifacts(model_id)
    for kind in ("converted", "original"):
        for art in arts:
            if art.kind == kind and art.filename.endswith(".onnx"):
                return art
    raise LookupError(f"model {model_id} has no ONNX artifact")
