"""Variants of a library model: an INT4 copy stored as its own model that says where it came from,
and the OpenVINO folder of an uploaded HF model; deleting a model removes its linked folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.errors import UserError
from backend.generate import library as generative
from backend.generate import variants
from backend.generate.ovexport import NncfConfig
from backend.generate.weightonly import WeightOnlyConfig
from backend.models import library, origin
from tests import llm_models
from tests.backend.generate.test_openvino import ov_greedy
from tests.backend.models.test_genai_ingest import greedy
from tests.pages import seed


def test_int4_copy_is_a_library_model_that_says_what_it_is(data_dir: Path, tmp_path) -> None:
    upload = llm_models.genai_zip(tmp_path)
    fp32 = seed.add_model(upload)
    int4 = variants.quantize_model(fp32.id, WeightOnlyConfig("rtn", 4, 32))

    assert int4.name.endswith("(int4 rtn b32 sym)") and generative.is_generative(int4)
    config_artifact = next(a for a in library.list_artifacts(int4.id) if "genai_config" in a.meta)
    assert config_artifact.meta["variant_of"] == fp32.id
    assert config_artifact.meta["facts"]["block_sizes"] == [32]
    assert "11 MatMulNBits (4-bit, block 32)" in config_artifact.meta["statement"]
    assert int4.op_histogram["com.microsoft::MatMulNBits"] == 11
    assert int4.size_bytes < fp32.size_bytes / 2
    folder = generative.genai_folder(int4.id)
    assert greedy(folder, "The assert statement", 8).strip()

    library.delete_model(int4.id)
    assert not folder.exists()
    assert generative.genai_folder(fp32.id).is_dir()  # the source is untouched


def test_an_int4_copy_outlives_its_source_and_says_the_source_is_deleted(
    data_dir: Path, tmp_path: Path
) -> None:
    """Deleting the FP32 upload keeps the INT4 copy made from it, usable (the tokenizer blobs
    both reference stay), its source id NULL and its origin saying so; the delete warned."""
    fp32 = seed.add_model(llm_models.genai_zip(tmp_path))
    int4 = variants.quantize_model(fp32.id, WeightOnlyConfig("rtn", 4, 32))
    assert (int4.origin, int4.source_model_id, int4.source_job_id) == ("variant", fp32.id, None)
    assert origin.origin_sentence(int4) == (
        f"Made from model #{fp32.id} ({fp32.name}), INT4 RTN block 32 symmetric; no job is "
        "recorded as making it."
    )
    assert origin.kept_on_delete(fp32) == (
        f"The models made from it (#{int4.id} {int4.name}) stay in the library, marked "
        '"source model deleted"; delete them on their own if you no longer want them.'
    )

    library.delete_model(fp32.id)
    kept = library.get_model(int4.id)
    assert kept.source_model_id is None and origin.origin_short(kept) == (
        "variant; source model deleted"
    )
    assert origin.origin_sentence(kept) == (
        f"Made from model #{fp32.id}, INT4 RTN block 32 symmetric; source model deleted, with "
        "the job that made it."
    )
    assert greedy(generative.genai_folder(int4.id), "The assert statement", 8).strip()


def test_openvino_folder_of_an_hf_upload(data_dir: Path, tmp_path) -> None:
    upload = llm_models.hf_zip(tmp_path)
    model = seed.add_model(upload)
    fp32 = variants.openvino_folder(model.id)
    assert fp32.facts.bytes_by_type["f32"] > 1 << 20
    int4 = variants.openvino_folder(model.id, NncfConfig("INT4_ASYM", 64, 1.0))
    assert "u4" in int4.facts.bytes_by_type
    assert ov_greedy(int4.folder).strip()
    # the FP32 export's facts file says what the FP32 IR holds; a copy beside the INT4 IR
    # (which nothing read) said the same of it
    assert (fp32.folder / variants.FACTS_FILE).is_file()
    assert not (int4.folder / variants.FACTS_FILE).exists()
    assert {p.name for p in int4.folder.iterdir()} == {p.name for p in fp32.folder.iterdir()} - {
        variants.FACTS_FILE
    }
    assert variants.openvino_folder(model.id).folder == fp32.folder  # exported once
    hf = variants.hf_folder(model.id)  # what the torch runtime opens: the upload, kept once
    assert (hf / "config.json").is_file() and (hf / "model.safetensors").is_file()
    assert variants.hf_folder(model.id) == hf
    library.delete_model(model.id)
    assert not hf.exists() and not fp32.folder.exists()


def test_a_genai_upload_has_no_hf_weights_to_export(data_dir: Path, tmp_path) -> None:
    upload = llm_models.genai_zip(tmp_path)
    model = seed.add_model(upload)
    with pytest.raises(UserError, match="no Hugging Face weights to rebuild or export from"):
        variants.openvino_folder(model.id)
