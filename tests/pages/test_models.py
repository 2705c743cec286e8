"""Models page: upload through the browser, bad uploads, the library, each model's origin (a
copy, a generation job's variant), long shapes, delete."""

from __future__ import annotations

from pathlib import Path

from onnx import TensorProto, helper

from backend.generate import jobspec
from backend.models import library
from pages.components.formatting import WRAP_LINE_HEIGHT, WRAP_ROW_HEIGHT, plain
from tests import llm_models
from tests.models import _finish, save
from tests.pages.seed import add_model, open_page, texts
from tests.workers import run_worker_once


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
    copy = library.list_models()[0]  # opened below, saying of which model it is a copy
    assert list(at.dataframe[0].value["origin"]) == [f"copy of #{first.id}", "upload", "upload"]
    assert plain(
        f"A second copy of model #{first.id} (mlp): the same file (sha256 {copy.sha256[:12]}), "
        "added again on request."
    ) in [c.value for c in at.caption]


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


def _shape_tables(at):  # noqa: ANN001, ANN202 - AppTest objects
    return [d for d in at.dataframe if list(d.value.columns) == ["name", "dtype", "shape"]]


def test_a_long_symbolic_shape_is_written_out_and_its_row_wraps(
    data_dir: Path, tmp_path: Path, mlp_path: Path
) -> None:
    """A cache tensor with four symbolic dims was cut to "[batch_size, num_key_v…" in the
    half-width Inputs table: its shape is written out whole and the row is tall enough to wrap
    (Streamlit wraps above 64 px); the mlp's short shapes keep one line per row."""
    dims = ["batch_size", "num_key_value_heads", "past_sequence_length", "head_size"]
    value = helper.make_tensor_value_info("past_key_values.0.key", TensorProto.FLOAT, dims)
    out = helper.make_tensor_value_info("present.0.key", TensorProto.FLOAT, dims)
    graph = helper.make_graph(
        [helper.make_node("Identity", [value.name], [out.name])], "cache", [value], [out]
    )
    cache = save(_finish(graph), tmp_path / "cache.onnx")
    long = add_model(cache, "cache")
    add_model(mlp_path, "mlp")

    at = open_page("models", model=long.id)
    assert not at.exception, at.exception
    full = "[batch_size, num_key_value_heads, past_sequence_length, head_size]"
    inputs, outputs = _shape_tables(at)
    assert list(inputs.value["shape"]) == list(outputs.value["shape"]) == [full]
    assert inputs.proto.row_height == outputs.proto.row_height == WRAP_ROW_HEIGHT
    library_table = at.dataframe[0]
    assert list(library_table.value["inputs"]) == ["x[N, 16]", f"past_key_values.0.key{full}"]
    assert library_table.proto.row_height == WRAP_ROW_HEIGHT  # the cache's cell is long

    at = open_page("models", model=library.list_models()[0].id)  # the mlp
    assert [t.proto.row_height for t in _shape_tables(at)] == [0, 0]  # one line: [N, 16]


def test_a_four_line_inputs_cell_gets_a_row_tall_enough_for_four_lines(
    data_dir: Path, tmp_path: Path
) -> None:
    """Seven inputs [batch_size, sequence_length_dimension, 16] with long names: the library's
    inputs cell wrapped to four lines in the browser (1100 and 1500 px) in a 68 px row that
    holds three, so "... +5 more" was cut. The row now has a fourth line's 20 px."""
    dims = ["batch_size", "sequence_length_dimension", 16]
    names = [f"very_long_input_tensor_name_number_{i}" for i in range(7)]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in names]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    graph = helper.make_graph([helper.make_node("Sum", names, ["y"])], "many", inputs, [out])
    model = add_model(save(_finish(graph), tmp_path / "many.onnx"), "many")

    at = open_page("models", model=model.id)
    assert not at.exception, at.exception
    library_table = at.dataframe[0]
    cell = library_table.value["inputs"][0]
    assert cell.endswith("[batch_size, sequence_length_dimension, 16] +5 more"), cell
    assert library_table.proto.row_height == WRAP_ROW_HEIGHT + WRAP_LINE_HEIGHT == 88


def test_an_int4_variant_names_its_job_and_source_and_outlives_the_source(
    data_dir: Path, tmp_path: Path
) -> None:
    """A real generation job makes the INT4 copy: its page says which job made it from which
    model with which settings; the source's delete box names the copy it keeps, and after the
    delete the copy is still in the library, saying its source model was deleted."""
    fp32 = add_model(llm_models.genai_zip(tmp_path))
    spec = jobspec.GenerationJobSpec(
        variants=("int4",), prompt_lengths=(16,), new_tokens=(4,), sequences=(1,)
    )
    job = jobspec.submit_generation(fp32.id, spec)
    run_worker_once(timeout=600)
    int4 = next(m for m in library.list_models() if m.id != fp32.id)

    at = open_page("models", model=int4.id)
    assert not at.exception, at.exception
    made = (
        f"Made by job #{job.id} from model #{fp32.id} ({fp32.name}), INT4 RTN block 32 symmetric."
    )
    assert plain(made) in [c.value for c in at.caption]
    origins = dict(zip(at.dataframe[0].value["id"], at.dataframe[0].value["origin"], strict=True))
    assert origins == {int4.id: f"job #{job.id} from #{fp32.id}", fp32.id: "upload"}

    at = open_page("models", model=fp32.id)
    kept = (
        f"The models made from it (#{int4.id} {int4.name}) stay in the library, marked "
        '"source model deleted"; delete them on their own if you no longer want them.'
    )
    assert plain(kept) in texts(at)
    at.checkbox(key=f"confirm_delete_{fp32.id}").check().run()
    at.button(key="delete_model").click().run()
    assert not at.exception, at.exception
    assert [m.id for m in library.list_models()] == [int4.id]
    at = open_page("models", model=int4.id)
    assert plain(
        f"Made from model #{fp32.id}, INT4 RTN block 32 symmetric; source model deleted, with "
        "the job that made it."
    ) in [c.value for c in at.caption]
    assert list(at.dataframe[0].value["origin"]) == ["variant; source model deleted"]
