"""Uploads end to end: real files in, real SQLite rows and artifact blobs out, or nothing at all."""

from __future__ import annotations

import hashlib
import stat
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from backend.errors import UserError
from backend.models.accepted import ACCEPTED_UPLOADS
from backend.models.ingest import AlreadyInLibrary, ingest_file
from storage.artifacts import ArtifactStore
from storage.repo import models as model_store
from tests import models, tf_models, tfchild


def stored_files(data_dir: Path) -> list[Path]:
    """Every file under the data folder except the database and the (empty) lock files."""
    return [
        p
        for p in data_dir.rglob("*")
        if p.is_file() and not p.name.startswith("optiboard.db") and ".locks" not in p.parts
    ]


def blob_files(data_dir: Path) -> list[Path]:
    return [
        p for p in (data_dir / "artifacts").rglob("*") if p.is_file() and ".locks" not in p.parts
    ]


def assert_nothing_stored(data_dir: Path) -> None:
    assert model_store.list_models() == []
    assert stored_files(data_dir) == []


def reject(path: Path, filename: str, message: str, data_dir: Path) -> None:
    with pytest.raises(UserError, match=message):
        ingest_file(path, filename)
    assert_nothing_stored(data_dir)


def run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


# ---- accepted uploads -----------------------------------------------------------------------


def test_onnx_upload_is_stored_with_its_metadata(data_dir: Path, mlp_path: Path) -> None:
    row = ingest_file(mlp_path, "mlp.onnx")

    assert row.name == "mlp"
    assert row.format == "onnx"
    assert row.sha256 == hashlib.sha256(mlp_path.read_bytes()).hexdigest()
    assert row.size_bytes == mlp_path.stat().st_size
    assert row.opset == 17
    assert row.inputs == [{"name": "x", "dtype": "float32", "shape": ["N", 16]}]
    assert row.op_histogram == {"Add": 2, "MatMul": 2, "Relu": 1, "Softmax": 1}
    assert row.parameter_count == 874
    assert model_store.list_models() == [row]
    onnx_art = model_store.model_file(row.id)
    assert (onnx_art.kind, onnx_art.filename) == ("original", "mlp.onnx")
    assert onnx_art.sha256 == row.sha256
    assert ArtifactStore().path_for(row.sha256).read_bytes() == mlp_path.read_bytes()
    assert len(blob_files(data_dir)) == 1
    assert not any((data_dir / "tmp").iterdir())


def test_given_name_wins_over_the_file_name(data_dir: Path, cnn_path: Path) -> None:
    row = ingest_file(cnn_path, "C:\\Users\\me\\resnet.onnx", name="  My ResNet  ")

    assert row.name == "My ResNet"
    assert model_store.list_artifacts(row.id)[0].filename == "resnet.onnx"


def test_the_same_file_twice_is_refused_naming_its_model_unless_a_copy_is_asked(
    data_dir: Path, mlp_path: Path, tmp_path: Path
) -> None:
    """A second add of the same file silently made a second model."""
    first = ingest_file(mlp_path, "mlp.onnx")
    before = sorted(stored_files(data_dir))
    renamed = tmp_path / "other-name.onnx"  # the content decides, not the file's name
    renamed.write_bytes(mlp_path.read_bytes())

    with pytest.raises(AlreadyInLibrary) as refused:
        ingest_file(renamed, "other-name.onnx", name="again")
    assert str(refused.value) == (
        f"The file 'other-name.onnx' is already model {first.id} \"mlp\" (the same content, "
        f"sha256 {first.sha256[:12]}), so nothing was added; use model {first.id}, or ask for "
        'a second copy (--copy, or "Add even if already in the library" on the Models page).'
    )
    assert refused.value.model_id == first.id
    assert model_store.list_models() == [first] and sorted(stored_files(data_dir)) == before

    second = ingest_file(mlp_path, "mlp.onnx", name="again", copy=True)
    assert [m.id for m in model_store.list_models()] == [second.id, first.id]
    assert len(blob_files(data_dir)) == 1  # two models, one blob


def test_two_uploads_of_one_file_at_once_make_one_model(data_dir: Path, mlp_path: Path) -> None:
    """Both pass the early check while the other is parsed in its child; the check under the
    upload's lock, just before the row is written, lets only one through."""
    from concurrent.futures import ThreadPoolExecutor

    def add(_: int) -> str:
        try:
            return f"model {ingest_file(mlp_path, 'mlp.onnx').id}"
        except AlreadyInLibrary as exc:
            return f"refused, model {exc.model_id}"

    with ThreadPoolExecutor(2) as pool:
        outcomes = sorted(pool.map(add, range(2)))
    (model,) = model_store.list_models()
    assert outcomes == [f"model {model.id}", f"refused, model {model.id}"]


def test_custom_domain_model_is_accepted_with_the_warning(data_dir: Path, tmp_path: Path) -> None:
    path = models.save(models.make_custom_op_model(), tmp_path / "custom.onnx")

    row = ingest_file(path, "custom.onnx")

    assert row.op_histogram == {"Relu": 1, "com.acme::MyOp": 1}
    assert len(row.warnings) == 1
    assert "custom domain 'com.acme' that no runtime can run" in row.warnings[0]


def test_zip_with_external_data_yields_a_runnable_single_file(
    data_dir: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle"
    models.save_with_external_data(models.make_mlp(), bundle, stem="mlp", location="weights.bin")
    archive = models.zip_folder(bundle, tmp_path / "mlp_ext.zip", top="export")
    reference = models.save(models.make_mlp(), tmp_path / "plain.onnx")

    row = ingest_file(archive, "mlp_ext.zip")

    assert row.format == "onnx-external-data"
    assert row.name == "mlp_ext"
    assert row.sha256 == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert row.parameter_count == 874
    kinds = {a.kind: a for a in model_store.list_artifacts(row.id)}
    assert set(kinds) == {"original", "converted"}
    assert kinds["original"].sha256 == row.sha256
    assert kinds["converted"].meta["data_files"] == ["weights.bin"]
    converted = model_store.model_file(row.id)
    assert converted.kind == "converted" and converted.filename == "mlp.onnx"
    x = np.random.default_rng(1).normal(size=(3, 16)).astype(np.float32)
    got = run(ArtifactStore().path_for(converted.sha256), {"x": x})[0]
    np.testing.assert_allclose(got, run(reference, {"x": x})[0], rtol=1e-6)
    assert len(blob_files(data_dir)) == 2
    assert not any((data_dir / "tmp").iterdir())


def test_onnx_detected_by_content_gets_an_onnx_artifact_name(
    data_dir: Path, mlp_path: Path
) -> None:
    row = ingest_file(mlp_path, "model.bin")

    assert model_store.model_file(row.id).filename == "model.onnx"
    assert len(blob_files(data_dir)) == 1


# ---- rejected uploads: a specific message, and no rows or files left --------------------------


def test_empty_file_is_rejected(data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    reject(path, "empty.onnx", "'empty.onnx' is empty", data_dir)


def test_random_bytes_are_not_a_model(data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "noise.onnx"
    path.write_bytes(b"\xff" + np.random.default_rng(0).bytes(4000))
    reject(path, "noise.onnx", "'noise.onnx' is not an ONNX model", data_dir)
    assert_names_every_kind(refusal(path, "noise.onnx"))


def test_text_file_is_not_a_model(data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "notes.onnx"
    path.write_text("these are my notes about the model\n" * 20)
    reject(path, "notes.onnx", "'notes.onnx' is a text file, not a model", data_dir)
    assert_names_every_kind(refusal(path, "notes.onnx"))


KINDS = (".onnx file", "external data", "SavedModel", "Hugging Face", "GenAI", ".pt2")


def refusal(path: Path, filename: str) -> str:
    with pytest.raises(UserError) as caught:
        ingest_file(path, filename)
    return str(caught.value)


def assert_names_every_kind(message: str) -> None:
    """Every accepted upload kind, in the one shared sentence, and the refusal one sentence."""
    assert ACCEPTED_UPLOADS in message
    assert all(kind in message for kind in KINDS), message
    assert message.endswith(".") and ". " not in message, message


@pytest.mark.parametrize(
    ("filename", "message"),
    [
        ("weights.pkl", "is a Python pickle, which is never loaded"),
        ("weights.pt", "is a pickled PyTorch model or state dict .torch.save., which is never"),
    ],
)
def test_pickle_is_refused_without_being_loaded(
    data_dir: Path, tmp_path: Path, filename: str, message: str
) -> None:
    path = tmp_path / filename
    path.write_bytes(b"\x80\x04\x95" + b"\x00" * 64)
    reject(path, filename, message, data_dir)


def test_truncated_onnx_is_rejected(data_dir: Path, mlp_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "cut.onnx"
    path.write_bytes(mlp_path.read_bytes()[: mlp_path.stat().st_size // 2])
    reject(path, "cut.onnx", "'cut.onnx' is a truncated or damaged ONNX file", data_dir)


def test_invalid_graph_is_rejected(data_dir: Path, tmp_path: Path) -> None:
    model = models.make_mlp()
    model.graph.node[0].input[0] = "missing_tensor"
    path = models.save(model, tmp_path / "broken.onnx")
    reject(path, "broken.onnx", "'broken.onnx' is not valid ONNX", data_dir)


def test_single_onnx_with_external_data_asks_for_a_zip(data_dir: Path, tmp_path: Path) -> None:
    path = models.save_with_external_data(models.make_mlp(), tmp_path / "ext")
    reject(path, "model.onnx", "external data file 'model.data'.*upload a .zip", data_dir)


def test_zip_missing_its_external_data_names_the_file(data_dir: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    models.save_with_external_data(models.make_mlp(), bundle, location="weights.bin")
    (bundle / "weights.bin").unlink()
    archive = models.zip_folder(bundle, tmp_path / "partial.zip")
    reject(archive, "partial.zip", "needs the external data file 'weights.bin'", data_dir)


def write_zip(path: Path, entries: list[tuple[zipfile.ZipInfo | str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in entries:
            archive.writestr(info, data)
    return path


def symlink_entry() -> zipfile.ZipInfo:
    info = zipfile.ZipInfo("model.onnx")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def device_entry() -> zipfile.ZipInfo:
    info = zipfile.ZipInfo("dev/tty")
    info.create_system = 3
    info.external_attr = (stat.S_IFCHR | 0o666) << 16
    return info


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (zipfile.ZipInfo("../evil.onnx"), "'../evil.onnx' points outside the archive"),
        (zipfile.ZipInfo("safe/../../evil"), "points outside the archive with '..'"),
        (zipfile.ZipInfo("/etc/evil.onnx"), "'/etc/evil.onnx' has an absolute path"),
        (symlink_entry(), "'model.onnx' is a symbolic link"),
        (device_entry(), "'dev/tty' is a device, pipe or socket"),
    ],
    ids=["traversal", "nested-traversal", "absolute", "symlink", "device"],
)
def test_dangerous_zip_entries_are_rejected(
    data_dir: Path, tmp_path: Path, mlp_path: Path, entry: zipfile.ZipInfo, message: str
) -> None:
    archive = write_zip(
        tmp_path / "bad.zip", [("ok/readme.txt", b"hello"), (entry, mlp_path.read_bytes())]
    )
    reject(archive, "bad.zip", message, data_dir)
    assert not (tmp_path / "evil.onnx").exists()


def test_encrypted_zip_entry_is_rejected(data_dir: Path, tmp_path: Path, mlp_path: Path) -> None:
    archive = write_zip(tmp_path / "locked.zip", [("model.onnx", mlp_path.read_bytes())])
    data = bytearray(archive.read_bytes())
    central = data.index(b"PK\x01\x02")
    data[central + 8] |= 0x1  # general purpose flag bit 0: encrypted
    archive.write_bytes(bytes(data))
    reject(archive, "locked.zip", "'model.onnx' is encrypted", data_dir)


def test_highly_compressed_member_is_rejected_as_a_bomb(data_dir: Path, tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "bomb.zip", [("model.onnx", b"\x00" * (20 << 20))])
    assert archive.stat().st_size < 100_000
    reject(archive, "bomb.zip", "'model.onnx' expands .* times .*looks like a zip bomb", data_dir)


def test_zip_over_the_uncompressed_cap_is_rejected(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_MAX_UNCOMPRESSED_MB", "1")
    noise = np.random.default_rng(0).bytes(3 << 20)  # incompressible, so the ratio check passes
    archive = write_zip(tmp_path / "big.zip", [("model.data", noise)])
    reject(archive, "big.zip", "would unpack to 3.0 MB, more than the limit of 1 MB", data_dir)


def test_zip_whose_header_understates_a_member_is_rejected(
    data_dir: Path, tmp_path: Path, mlp_path: Path
) -> None:
    archive = write_zip(tmp_path / "liar.zip", [("model.onnx", mlp_path.read_bytes())])
    data = bytearray(archive.read_bytes())
    central = data.index(b"PK\x01\x02")
    data[central + 24 : central + 28] = (100).to_bytes(4, "little")  # uncompressed size
    archive.write_bytes(bytes(data))
    reject(archive, "liar.zip", "'model.onnx' could not be read", data_dir)


def test_zip_with_too_many_members_is_rejected(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_MAX_ZIP_MEMBERS", "50")
    archive = write_zip(tmp_path / "many.zip", [(f"f{i}.txt", b"x") for i in range(51)])
    reject(archive, "many.zip", "holds 51 entries, more than the limit of 50", data_dir)


def test_zip_without_a_model_says_what_was_expected(data_dir: Path, tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "docs.zip", [("docs/readme.md", b"# hi"), ("a.csv", b"1,2")])
    reject(archive, "docs.zip", "holds no model file .a.csv, docs/readme.md.", data_dir)
    assert_names_every_kind(refusal(archive, "docs.zip"))


def test_empty_zip_says_it_is_empty(data_dir: Path, tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "empty.zip", [])
    reject(archive, "empty.zip", "The zip 'empty.zip' is empty; upload a .onnx file", data_dir)
    assert_names_every_kind(refusal(archive, "empty.zip"))


def test_zip_with_two_onnx_files_is_rejected(
    data_dir: Path, tmp_path: Path, mlp_path: Path
) -> None:
    model = mlp_path.read_bytes()
    archive = write_zip(tmp_path / "two.zip", [("a.onnx", model), ("b/b.onnx", model)])
    reject(archive, "two.zip", r"holds 2 .onnx files \(a.onnx, b/b.onnx\)", data_dir)


def test_file_named_zip_that_is_not_a_zip_is_rejected(data_dir: Path, mlp_path: Path) -> None:
    reject(mlp_path, "model.zip", "not a readable zip file", data_dir)


def test_upload_over_the_size_cap_is_rejected_before_any_work(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPTIBOARD_MAX_UPLOAD_MB", "1")
    path = tmp_path / "huge.onnx"
    path.write_bytes(b"\x08" * (2 << 20))
    reject(path, "huge.onnx", "'huge.onnx' is 2.0 MB, over the upload limit of 1 MB", data_dir)


def test_failed_registration_removes_new_blobs_but_keeps_shared_ones(
    data_dir: Path, tmp_path: Path, mlp_path: Path, cnn_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ingest_file(mlp_path, "mlp.onnx")
    kept = ArtifactStore().path_for(first.sha256)
    # A database that cannot be opened makes create_model fail after the blobs were written.
    monkeypatch.setenv("OPTIBOARD_DATABASE_URL", f"sqlite:///{tmp_path}/no/such/dir/x.db")

    with pytest.raises(Exception, match="unable to open database file"):
        ingest_file(mlp_path, "mlp.onnx", copy=True)  # past the duplicate check, to the write
    with pytest.raises(Exception, match="unable to open database file"):
        ingest_file(cnn_path, "cnn.onnx")

    assert blob_files(data_dir) == [kept]
    monkeypatch.delenv("OPTIBOARD_DATABASE_URL")
    assert model_store.list_models() == [first]


# ---- TensorFlow SavedModel uploads (real TensorFlow and tf2onnx in a child process) -----------


def test_tensorflow_savedmodel_zip_is_converted_and_matches_tensorflow(
    data_dir: Path, tmp_path: Path
) -> None:
    saved = models.save_dense_savedmodel(tmp_path / "dense")
    archive = models.zip_folder(saved, tmp_path / "dense.zip", top="dense_model")

    row = ingest_file(archive, "dense.zip")

    assert row.format == "savedmodel"
    assert row.name == "dense"
    assert row.inputs[0]["dtype"] == "float32" and row.inputs[0]["shape"][1] == 8
    kinds = {a.kind: a for a in model_store.list_artifacts(row.id)}
    assert set(kinds) == {"original", "converted", "conversion_log"}
    assert kinds["converted"].meta["signature"] == "serving_default"
    assert kinds["converted"].meta["opset"] == 17
    assert kinds["conversion_log"].meta["tf2onnx_version"] == "1.17.0"
    store = ArtifactStore()
    log = store.path_for(kinds["conversion_log"].sha256).read_text()
    assert "Successfully converted TensorFlow model" in log
    x = np.random.default_rng(2).normal(size=(5, 8)).astype(np.float32)
    expected = tfchild.in_child(tf_models.serving_output, saved, x)
    onnx_file = store.path_for(model_store.model_file(row.id).sha256)
    got = run(onnx_file, {row.inputs[0]["name"]: x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert len(blob_files(data_dir)) == 3
    assert not any((data_dir / "tmp").iterdir())


def test_tensorflow_savedmodel_without_signatures_is_rejected(
    data_dir: Path, tmp_path: Path
) -> None:
    saved = models.save_savedmodel_without_signatures(tmp_path / "nosig")
    archive = models.zip_folder(saved, tmp_path / "nosig.zip")
    reject(archive, "nosig.zip", "The SavedModel has no serving signature to convert", data_dir)
