"""onnxruntime-genai's model builder in the sandboxed child: FP16 and INT4 folders that hold what
was asked for, and a failing build that leaves nothing behind."""

from __future__ import annotations

import json
import zipfile

import onnx
import pytest

from backend.errors import UserError
from backend.generate.facts import weight_facts
from backend.models.hfconvert import BuilderOptions, BuildFailed, build_genai_folder
from tests import llm_models
from tests.backend.models.test_genai_ingest import greedy


def test_int4_build_holds_matmulnbits_of_the_asked_block_and_generates(tmp_path) -> None:
    options = BuilderOptions("int4", block_size=64, accuracy_level=4)
    built = build_genai_folder(llm_models.trained_llama().folder, tmp_path / "int4", options)

    facts = weight_facts(built.folder / "model.onnx")
    assert len(facts.quantized) == 11 and facts.float_matmuls == 0
    assert facts.bits == [4] and facts.block_sizes == [64]
    assert {q.accuracy_level for q in facts.quantized} == {4}
    assert built.versions["onnxruntime_genai"] == "0.18.0"
    assert "Saving GenAI config" in built.log
    assert greedy(built.folder, "The assert statement", 8).strip()


def test_fp16_build_targets_cuda_with_half_the_weight_bytes(tmp_path) -> None:
    source = llm_models.trained_llama().folder
    built = build_genai_folder(source, tmp_path / "fp16", BuilderOptions("fp16"))

    graph = onnx.load(str(built.folder / "model.onnx"), load_external_data=False)
    assert {t.data_type for t in graph.graph.initializer} == {onnx.TensorProto.FLOAT16}
    fp32 = weight_facts(llm_models.built_genai_folder() / "model.onnx")
    assert weight_facts(built.folder / "model.onnx").total_bytes == fp32.total_bytes // 2
    config = json.loads((built.folder / "genai_config.json").read_text())
    assert "cuda" in json.dumps(config["model"]["decoder"]["session_options"])


def test_a_build_that_fails_in_the_child_says_why_and_leaves_nothing(tmp_path) -> None:
    upload = llm_models.hf_zip(tmp_path, config_changes={"intermediate_size": 64})
    folder = tmp_path / "hf"
    zipfile.ZipFile(upload).extractall(folder)
    with pytest.raises(BuildFailed, match="The model builder could not convert the model") as err:
        build_genai_folder(folder, tmp_path / "out", BuilderOptions("fp32"))
    assert "mismatched_sizes" in str(err.value)  # transformers' own words, from the child
    assert "size mismatch" in err.value.log  # the child's whole output, for the conversion log
    assert not (tmp_path / "out").exists()


def test_bad_builder_options_get_one_sentence() -> None:
    with pytest.raises(UserError, match="Precision 'int3' is not one the model builder makes"):
        BuilderOptions("int3")
    with pytest.raises(UserError, match="Block size 48 is not supported"):
        BuilderOptions("int4", block_size=48)
