"""Models page: upload through the browser, bad uploads, the library, delete."""

from __future__ import annotations

from pathlib import Path

from backend.models import library
from pages.components.formatting import plain
from tests.pages.seed import add_model, open_page, texts


def _upload(at, name: str, content: bytes):  # noqa: ANN001, ANN202 - AppTest objects
    at.file_uploader(key="upload_file").set_value((name, content, "application/octet-stream"))
    next(b for b in at.button if b.label == "Add to library").click()
    return at.run()


def test_empty_library_offers_the_upload(data_dir: Path) -> None:
    at = open_page("models")
    assert not at.exception
    assert "The library is empty" in texts(at)
    # any type is taken: a filter of types made a wrong file vanish from the box, unexplained
    assert not at.file_uploader(key="upload_file").allowed_type


def test_a_file_that_is_no_model_is_refused_in_one_sentence(data_dir: Path) -> None:
    at = _upload(open_page("models"), "notes.txt", b"held-out prompts, not a model\n")
    assert not at.exception, at.exception
    assert [e.value.replace("\\", "") for e in at.error] == [  # the page escapes Markdown
        "The file 'notes.txt' is a text file, not a model; upload a .onnx file, or a .zip of an "
        "ONNX model with its external data files, of a TensorFlow SavedModel folder, of a Hugging "
        "Face model folder or of an ONNX Runtime GenAI model folder, or a PyTorch "
        "ExportedProgram (.pt2)."
    ]
    assert library.list_models() == []


def test_uploading_an_onnx_adds_it_to_the_library_with_metadata(
    data_dir: Path, mlp_path: Path
) -> None:
    at = _upload(open_page("models"), "mlp.onnx", mlp_path.read_bytes())
    assert not at.exception, at.exception
    assert [m.name for m in library.list_models()] == ["mlp"]
    assert "Added mlp" in texts(at)
    assert "Opset=" in texts(at) and "Nodes=6" in texts(at)
    assert at.query_params["model"] == str(library.list_models()[0].id)


def test_the_same_file_again_adds_nothing_opens_its_model_and_says_how_to_copy_it(
    data_dir: Path, mlp_path: Path, cnn_path: Path
) -> None:
    at = _upload(open_page("models"), "mlp.onnx", mlp_path.read_bytes())
    (first,) = library.list_models()
    at = _upload(at, "cnn.onnx", cnn_path.read_bytes())  # the picker moves to the cnn
    at = _upload(at, "mlp.onnx", mlp_path.read_bytes())
    assert not at.exception and not at.error, at.error  # nothing went wrong: no red box
    assert [i.value.replace("\\", "") for i in at.info] == [
        f"The file 'mlp.onnx' is already model {first.id} \"mlp\" (the same content, sha256 "
        f"{first.sha256[:12]}), so nothing was added; use model {first.id}, or ask for a second "
        'copy (tick "Add even if already in the library" above).'
    ]  # the page's way to copy it, not the CLI's --copy
    assert at.session_state["url_model"] == first.id  # the model it is, opened below
    assert len(library.list_models()) == 2
    at.checkbox(key="upload_copy").check()
    at = _upload(at, "mlp.onnx", mlp_path.read_bytes())
    assert not at.exception and not at.error, at.error
    names = [m.name for m in library.list_models()]
    assert names == [f"mlp (copy of #{first.id})", "cnn", "mlp"]  # newest first, told apart


def test_garbage_upload_shows_the_ingestion_error_and_stores_nothing(data_dir: Path) -> None:
    at = _upload(open_page("models"), "broken.onnx", b"this is not a model at all")
    assert at.error, "a bad upload must show an error"
    assert plain("broken.onnx") in at.error[0].value  # quoted as text, never as Markdown
    assert library.list_models() == []


def test_library_shows_metadata_and_downloads_for_every_artifact(
    data_dir: Path, mlp_path: Path, cnn_path: Path
) -> None:
    add_model(mlp_path, "mlp")
    cnn = add_model(cnn_path, "cnn")
    at = open_page("models", model=cnn.id)
    table = at.dataframe[0].value
    assert set(table["name"]) == {"mlp", "cnn"}
    assert at.selectbox(key="url_model").value == cnn.id
    assert "Format=onnx" in texts(at)
    downloads = [e for e in at.get("download_button")]
    assert len(downloads) == len(library.list_artifacts(cnn.id)) == 1


def test_delete_needs_confirmation_then_removes_the_model(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path, "mlp")
    at = open_page("models", model=model.id)
    delete = at.button(key="delete_model")
    assert delete.disabled
    at.checkbox(key=f"confirm_delete_{model.id}").check().run()
    at.button(key="delete_model").click().run()
    assert not at.exception
    assert library.list_models() == []
    assert "The library is empty" in texts(at)
