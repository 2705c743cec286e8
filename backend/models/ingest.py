"""Turn one upload (.onnx, zipped ONNX with external data, zipped SavedModel, PyTorch
ExportedProgram .pt2, zipped generative model folder: backend.models.genai) into a library
model.

All or nothing: every check runs before the first blob is written, blobs this call added are
removed again if anything later fails, and the model row and its artifacts are one transaction.
Nothing is ever unpickled, and the upload is never parsed in this process: onnx loading, checking
and shape inference run in a limited child (backend.models.parse).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import settings
from backend.errors import UserError
from backend.launch.folders import owned_folder
from backend.models import genai as generative
from backend.models import parse
from backend.models.accepted import ACCEPTED_UPLOADS
from backend.models.inspect import ModelMetadata
from backend.models.pt2check import refuse_other_kinds, sniff_torch_zip
from backend.models.pt2convert import convert_exported_program
from backend.models.safezip import extract_zip
from backend.models.tfconvert import DEFAULT_OPSET, convert_savedmodel
from storage.artifacts import ArtifactStore, sha256_file
from storage.repo import models as model_store
from storage.repo.models import ModelRow, NewArtifact, Provenance
from storage.states import ModelOrigin

MB = 1 << 20
SAVEDMODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def max_upload_bytes() -> int:
    return settings.MAX_UPLOAD_MB.get() * MB


@dataclass
class _Plan:
    """What a checked upload becomes: a format, its metadata and the files to store."""

    format: str
    metadata: ModelMetadata
    files: list[tuple[str, Path, str, dict[str, Any]]] = field(default_factory=list)


class AlreadyInLibrary(UserError):
    """This exact file (the same sha256) is already a library model; nothing was added."""

    def __init__(self, filename: str, model: ModelRow) -> None:
        self.model_id, self.filename, self.model = model.id, filename, model
        super().__init__(
            self.said('--copy, or "Add even if already in the library" on the Models page')
        )

    def said(self, how_to_copy: str) -> str:
        """The sentence, with how to ask for a second copy where it is read (CLI or page)."""
        model = self.model
        return (
            f'The file {self.filename!r} is already model {model.id} "{model.name}" (the same '
            f"content, sha256 {model.sha256[:12]}), so nothing was added; use model {model.id}, "
            f"or ask for a second copy ({how_to_copy})."
        )


def _refuse_duplicate(sha256: str, filename: str) -> None:
    if (model := model_store.model_with_sha256(sha256)) is not None:
        raise AlreadyInLibrary(filename, model)


def ingest_file(
    path: Path,
    original_filename: str,
    name: str | None = None,
    store: ArtifactStore | None = None,
    copy: bool = False,
) -> ModelRow:
    """Check, convert if needed, store and register one uploaded file; UserError says why not.
    The same file twice is refused (AlreadyInLibrary) before any parsing, unless `copy` asks
    for a second model of it."""
    path = Path(path)
    store = store or ArtifactStore()
    filename = _clean_filename(original_filename)
    size = path.stat().st_size
    if size == 0:
        raise UserError(f"The file {filename!r} is empty; choose the model file and upload again.")
    if not copy:  # before the children parse or convert it: a second add costs a hash only
        _refuse_duplicate(sha256_file(path), filename)
    limit = max_upload_bytes()
    if size > limit:
        raise UserError(
            f"The file {filename!r} is {size / MB:.1f} MB, over the upload limit of "
            f"{limit / MB:.0f} MB; upload a smaller model or raise OPTIBOARD_MAX_UPLOAD_MB."
        )
    is_zip = _sniff(path, filename)
    model_name = ((name or "").strip() or Path(filename).stem or "model")[:255]

    work_root = store.root.parent / "tmp"
    with owned_folder("ingest", under=work_root) as work:  # swept if this process is killed
        torch_kind = sniff_torch_zip(path) if is_zip else None
        if torch_kind is not None:
            plan = _plan_pt2(path, filename, work, torch_kind)
        else:
            plan = _plan_zip(path, filename, work) if is_zip else _plan_onnx(path, filename)
        return _store_model(store, path, filename, size, model_name, plan, copy)


def _store_model(
    store: ArtifactStore, path: Path, filename: str, size: int, name: str, plan: _Plan, copy: bool
) -> ModelRow:
    """Copy the checked files in and register the model while their digests stay locked, so a
    remover (a refused result write, a model deletion) never takes a blob this row is about to
    reference; if the row is not written, `putting` removes the blobs this call added. The
    upload's lock also makes the duplicate check exact: two uploads of one file at once, one
    model."""
    with store.putting([path, *(file for _, file, _, _ in plan.files)]) as stored:
        upload, *files = stored
        original = model_store.model_with_sha256(upload.sha256)
        if original is not None and not copy:
            raise AlreadyInLibrary(filename, original)
        if original is not None and name == Path(filename).stem[:255]:  # no name was given
            name = f"{name} (copy of #{original.id})"[:255]  # two rows both "mlp" read as one
        provenance = Provenance()  # an upload; a copy says of which model (a name may not)
        if original is not None:
            provenance = Provenance(ModelOrigin.COPY, source_model_id=original.id)
        artifacts = [NewArtifact("original", upload.sha256, size, filename, {})]
        for (kind, _, stored_name, meta), blob in zip(plan.files, files, strict=True):
            artifacts.append(NewArtifact(kind, blob.sha256, blob.size_bytes, stored_name, meta))
        return model_store.create_model(
            name=name,
            sha256=upload.sha256,
            format=plan.format,
            size_bytes=size,
            metadata=plan.metadata.to_dict(),
            artifacts=artifacts,
            provenance=provenance,
        )


def _clean_filename(original_filename: str) -> str:
    """The base name a browser sent, without any directory part."""
    base = original_filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    return (base or "upload")[:255]


def _looks_like_text(head: bytes) -> bool:
    if not head or b"\x00" in head:
        return False
    for cut in range(4):  # the sample may end inside a multi-byte character
        try:
            text = head[: len(head) - cut].decode("utf-8")
            break
        except UnicodeDecodeError:
            continue
    else:
        return False
    return all(c.isprintable() or c in "\r\n\t\f" for c in text)


def _sniff(path: Path, filename: str) -> bool:
    """True for a zip, False for a would-be ONNX protobuf; known non-model files are refused."""
    with open(path, "rb") as handle:
        head = handle.read(4096)
    lower = filename.lower()
    if head.startswith(ZIP_MAGIC) or lower.endswith(".zip"):
        return True
    if head.startswith(b"\x89HDF"):
        raise UserError(
            f"The file {filename!r} is a Keras HDF5 file, not an ONNX model; save it as a "
            "SavedModel and upload the folder as a .zip, or export it to ONNX."
        )
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        if lower.endswith((".pt", ".pth", ".pt2", ".bin", ".ckpt")):
            refuse_other_kinds("pickled", filename)
        raise UserError(
            f"The file {filename!r} is a Python pickle, which is never loaded here; "
            "export the model to ONNX and upload the .onnx file."
        )
    if lower in SAVEDMODEL_FILES:
        raise UserError(
            f"The file {filename!r} is only part of a TensorFlow SavedModel; zip the whole "
            "SavedModel folder (with variables/) and upload the .zip."
        )
    if _looks_like_text(head):
        raise UserError(
            f"The file {filename!r} is a text file, not a model; upload {ACCEPTED_UPLOADS}."
        )
    return False


def _onnx_name(filename: str) -> str:
    return filename if filename.lower().endswith(".onnx") else f"{Path(filename).stem}.onnx"


def _plan_onnx(path: Path, filename: str) -> _Plan:
    """A single .onnx upload: valid and self-contained (checked in a child), stored as is."""
    metadata = ModelMetadata(**parse.check_onnx(path, filename))
    plan = _Plan(format="onnx", metadata=metadata)
    if not filename.lower().endswith(".onnx"):
        # model_file() needs a name ending in .onnx; the upload itself is stored as original.
        plan.files.append(("converted", path, _onnx_name(filename), {"from": "renamed"}))
    return plan


def _is_ignored(relative: Path) -> bool:
    """macOS zip noise: __MACOSX folders, AppleDouble ._ files, .DS_Store."""
    return (
        "__MACOSX" in relative.parts
        or relative.name.startswith("._")
        or relative.name == ".DS_Store"
    )


def _plan_zip(path: Path, filename: str, work: Path) -> _Plan:
    folder = extract_zip(path, parent=work, quota_root=work.parent)
    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    files = [p for p in files if not _is_ignored(p.relative_to(folder))]
    if generative.wants_generative(files, folder):
        plan = generative.plan_generative(files, folder, filename, work)
        return _Plan(plan.format, ModelMetadata(**plan.metadata), plan.files)
    onnx_files = [p for p in files if p.suffix.lower() == ".onnx"]
    saved_models = [p for p in files if p.name in SAVEDMODEL_FILES]
    shown = [p.relative_to(folder).as_posix() for p in onnx_files + saved_models]
    if onnx_files and saved_models:
        raise UserError(
            f"The zip {filename!r} holds both ONNX files and a SavedModel ({', '.join(shown)}); "
            "upload one model per zip."
        )
    if len(onnx_files) > 1:
        raise UserError(
            f"The zip {filename!r} holds {len(onnx_files)} .onnx files ({', '.join(shown)}); "
            "upload one model per zip."
        )
    if len(saved_models) > 1:
        raise UserError(
            f"The zip {filename!r} holds {len(saved_models)} SavedModels ({', '.join(shown)}); "
            "upload one model per zip."
        )
    if onnx_files:
        return _plan_external_data(onnx_files[0], folder, work)
    if saved_models:
        return _plan_savedmodel(saved_models[0].parent, filename, work)
    if not files:
        raise UserError(f"The zip {filename!r} is empty; upload {ACCEPTED_UPLOADS}.")
    raise UserError(
        f"The zip {filename!r} holds no model file ({_some(files, folder)}); upload "
        f"{ACCEPTED_UPLOADS}."
    )


def _some(files: list[Path], folder: Path, limit: int = 3) -> str:
    """A few of the zip's files, so a refusal shows what it did find."""
    shown = [p.relative_to(folder).as_posix() for p in files[:limit]]
    more = f" and {len(files) - limit} more" if len(files) > limit else ""
    return ", ".join(shown) + more


def _plan_external_data(model_path: Path, folder: Path, work: Path) -> _Plan:
    """An .onnx with its data files: every reference checked, then internalised into one file."""
    shown = model_path.relative_to(folder).as_posix()
    converted = work / model_path.name
    checked = parse.internalise(model_path, folder, shown, converted)
    locations = checked["locations"]
    metadata = ModelMetadata(**checked["metadata"])
    plan = _Plan(format="onnx-external-data" if locations else "onnx", metadata=metadata)
    meta = {"from": "external-data", "data_files": locations, "source": shown}
    plan.files.append(("converted", converted, _onnx_name(model_path.name), meta))
    return plan


def _plan_savedmodel(saved_model_dir: Path, filename: str, work: Path) -> _Plan:
    """A zipped SavedModel: convert in a child process and keep the log."""
    stem = Path(filename).stem or "model"
    conversion = convert_savedmodel(saved_model_dir, work / f"{stem}.onnx", opset=DEFAULT_OPSET)
    metadata = ModelMetadata(**parse.inspect(conversion.onnx_path, f"{stem}.onnx"))
    log_path = work / "conversion_log.txt"
    log_path.write_text(conversion.log, encoding="utf-8")
    plan = _Plan(format="savedmodel", metadata=metadata)
    meta = {
        "signature": conversion.signature,
        "opset": conversion.opset,
        "tf2onnx_version": conversion.tf2onnx_version,
        "tensorflow_version": conversion.tensorflow_version,
    }
    plan.files.append(("converted", conversion.onnx_path, f"{stem}.onnx", meta))
    plan.files.append(("conversion_log", log_path, "conversion_log.txt", meta))
    return plan


def _plan_pt2(path: Path, filename: str, work: Path, kind: str) -> _Plan:
    """A PyTorch archive: TorchScript and pickles refused, an ExportedProgram checked, converted
    in a sandboxed child and compared with ONNX Runtime there; the comparison is kept."""
    refuse_other_kinds(kind, filename)
    stem = Path(filename).stem or "model"
    conversion = convert_exported_program(path, work / f"{stem}.onnx", filename)
    metadata = ModelMetadata(**parse.inspect(conversion.onnx_path, f"{stem}.onnx"))
    log_path = work / "conversion_log.txt"
    log_path.write_text(conversion.log, encoding="utf-8")
    plan = _Plan(format="pytorch-exported", metadata=metadata)
    meta = {
        "from": "pytorch-exported",
        "opset": conversion.opset,
        "versions": conversion.versions,
        "dims": conversion.dims,
        "check": conversion.check,
    }
    plan.files.append(("converted", conversion.onnx_path, f"{stem}.onnx", meta))
    plan.files.append(("conversion_log", log_path, "conversion_log.txt", meta))
    return plan
