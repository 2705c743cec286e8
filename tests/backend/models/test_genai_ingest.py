"""Generative uploads end to end: a GenAI folder zip or an HF folder zip becomes a library model
whose folder onnxruntime_genai loads and generates from; bad zips store nothing."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from backend.errors import UserError
from backend.generate import library as generative
from backend.models import library
from backend.models.ingest import ingest_file
from tests import llm_models
from tests.backend.models.test_ingest import assert_nothing_stored, reject


def greedy(folder: Path, prompt: str, tokens: int) -> str:
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tokenizer = og.Tokenizer(model)
    ids = tokenizer.encode(prompt)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(ids) + tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(ids)
    while not generator.is_done():
        generator.generate_next_token()
    return tokenizer.decode(generator.get_sequence(0)[len(ids) :])


def test_genai_folder_zip_is_stored_as_a_folder_that_generates(data_dir: Path, tmp_path) -> None:
    upload = llm_models.genai_zip(tmp_path)
    row = ingest_file(upload, upload.name)

    assert row.format == "genai" and generative.is_generative(row)
    stored = {a.filename: a for a in library.list_artifacts(row.id) if a.kind == "genai"}
    assert {"model.onnx", "model.onnx.data", "genai_config.json", "tokenizer.json"} <= set(stored)
    # The Graph page lists .onnx artifacts: only the graph file, never the weights beside it.
    graph_files = [a for a in library.list_artifacts(row.id) if a.filename.endswith(".onnx")]
    assert [a.filename for a in graph_files] == ["model.onnx"]
    assert graph_files[0].size_bytes < stored["model.onnx.data"].size_bytes / 10
    assert row.op_histogram.get("com.microsoft::GroupQueryAttention") == llm_models.TINY.layers
    assert generative.genai_config(row.id)["model"]["type"] == "llama"
    text = greedy(generative.genai_folder(row.id), "The assert statement", 12)
    assert text.strip()
    with pytest.raises(UserError, match="folder of files, not one ONNX file"):
        library.onnx_path(row.id)


def test_hf_folder_zip_is_converted_in_the_sandbox_and_generates(data_dir: Path, tmp_path) -> None:
    upload = llm_models.hf_zip(tmp_path, llm_models.TINY_GQA)
    row = ingest_file(upload, upload.name)

    assert row.format == "hf-genai"
    kinds = {a.kind for a in library.list_artifacts(row.id)}
    assert {"original", "genai", "conversion_log"} <= kinds
    config = generative.genai_config(row.id)["model"]["decoder"]
    assert config["num_key_value_heads"] < config["num_attention_heads"]
    assert greedy(generative.genai_folder(row.id), "Emulating callable objects", 8).strip()


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        ({"pickle_weights": True}, "pickled weights .*pytorch_model.bin.*never loaded"),
        ({"drop": ("tokenizer.json",)}, "has no tokenizer.json"),
        (
            {"config_changes": {"architectures": ["BertForMaskedLM"], "model_type": "bert"}},
            "is a bert \\(BertForMaskedLM\\), which onnxruntime-genai's model builder cannot",
        ),
        ({"config_changes": {"auto_map": {"AutoModel": "x.Model"}}}, "its own Python code"),
    ],
    ids=["pickle", "no-tokenizer", "unsupported-architecture", "custom-code"],
)
def test_bad_hf_folder_is_refused_and_nothing_is_stored(
    data_dir: Path, tmp_path, spoil, message
) -> None:
    upload = llm_models.hf_zip(tmp_path, **spoil)
    reject(upload, upload.name, message, data_dir)


def test_genai_zip_without_tokenizer_is_refused(data_dir: Path, tmp_path) -> None:
    upload = llm_models.genai_zip(tmp_path, drop=("tokenizer.json",))
    reject(upload, upload.name, "has no tokenizer.json", data_dir)


def test_genai_zip_whose_weights_are_missing_is_refused(data_dir: Path, tmp_path) -> None:
    upload = llm_models.genai_zip(tmp_path, drop=("model.onnx.data",))
    reject(upload, upload.name, "needs the external data file 'model.onnx.data'", data_dir)


def test_genai_zip_with_path_traversal_is_refused(data_dir: Path, tmp_path) -> None:
    upload = llm_models.genai_zip(tmp_path)
    with zipfile.ZipFile(upload, "a") as archive:
        archive.writestr("../escape.txt", "x")
    with pytest.raises(UserError):
        ingest_file(upload, upload.name)
    assert_nothing_stored(data_dir)
    assert not (tmp_path / "escape.txt").exists()


def test_hf_zip_with_a_zip_bomb_member_is_refused_before_any_conversion(
    data_dir: Path, tmp_path
) -> None:
    upload = llm_models.hf_zip(tmp_path)
    with zipfile.ZipFile(upload, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("vocab.txt", b"\0" * (64 << 20))  # 64 MB of zeros, ~1000x compressed
    reject(upload, upload.name, "looks like a zip bomb", data_dir)


BLOCK_TORCH = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'transformers'):
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Block())
from backend.errors import UserError
from backend.models.ingest import ingest_file
try:
    ingest_file(sys.argv[1], 'llama.zip')
except UserError as exc:
    print('REFUSED', exc)
row = ingest_file(sys.argv[2], 'genai.zip')
print('STORED', row.format)
"""


def test_without_torch_hf_is_refused_with_the_reason_and_genai_still_works(
    data_dir: Path, tmp_path
) -> None:
    hf, genai = llm_models.hf_zip(tmp_path), llm_models.genai_zip(tmp_path)
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH, str(hf), str(genai)],
        capture_output=True,
        text=True,
        cwd=root,
        env={**__import__("os").environ, "PYTHONPATH": str(root)},
        timeout=300,
    )
    assert "REFUSED" in done.stdout, done.stderr[-2000:]
    assert "needs torch, transformers (not installed here)" in done.stdout
    assert "requirements-genai.txt" in done.stdout
    assert "STORED genai" in done.stdout
