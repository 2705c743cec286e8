"""Weight-only quantization of the trained tiny Llama: the graph holds what was asked for, the
bytes are what packed blocks plus scales cost, and onnxruntime_genai still generates from it."""

from __future__ import annotations

import pytest

from backend.errors import UserError
from backend.generate.weightonly import WeightOnlyConfig, quantize_folder
from tests import llm_models
from tests.backend.models.test_genai_ingest import greedy


def expected_ratio(bits: int, block: int, symmetric: bool) -> float:
    """Bytes per float32 weight: packed bits, one fp32 scale per block, a zero point if asym."""
    per_weight = bits / 8 + 4 / block + (0 if symmetric else bits / 8 / block)
    return per_weight / 4


@pytest.fixture(scope="module")
def fp32_folder():
    return llm_models.built_genai_folder(llm_models.TINY, "fp32")


@pytest.mark.parametrize(
    "config",
    [
        WeightOnlyConfig("rtn", bits=4, block_size=32, symmetric=True),
        WeightOnlyConfig("rtn", bits=4, block_size=128, symmetric=False, accuracy_level=4),
        WeightOnlyConfig("rtn", bits=8, block_size=64, symmetric=True),
    ],
    ids=lambda c: c.label.replace(" ", "-"),
)
def test_rtn_variant_holds_matmulnbits_of_the_asked_shape(tmp_path, fp32_folder, config) -> None:
    variant = quantize_folder(fp32_folder, tmp_path / "q", config)

    facts = variant.facts
    assert len(facts.quantized) == variant.source_facts.float_matmuls == 11  # 5 per layer + head
    assert facts.float_matmuls == 0
    assert facts.bits == [config.bits] and facts.block_sizes == [config.block_size]
    assert all(q.has_zero_points != config.symmetric for q in facts.quantized)
    if config.accuracy_level is not None:
        assert {q.accuracy_level for q in facts.quantized} == {config.accuracy_level}
    assert variant.matmul_ratio == pytest.approx(
        expected_ratio(config.bits, config.block_size, config.symmetric), rel=0.01
    )
    assert f"{len(facts.quantized)} MatMulNBits ({config.bits}-bit" in variant.statement()
    assert greedy(variant.folder, "The assert statement", 8).strip()


def test_int4_rtn_block_32_is_about_an_eighth_of_fp32_matmul_bytes(tmp_path, fp32_folder) -> None:
    variant = quantize_folder(fp32_folder, tmp_path / "q", WeightOnlyConfig())
    # 4 bits per weight is 1/8 of fp32; one fp32 scale per 32 weights adds 1/32: 0.156.
    assert 1 / 8 < variant.matmul_ratio < 1 / 6
    assert variant.facts.total_bytes < variant.source_facts.total_bytes / 3


def test_hqq_variant_generates(tmp_path, fp32_folder) -> None:
    variant = quantize_folder(fp32_folder, tmp_path / "q", WeightOnlyConfig("hqq", block_size=64))
    assert variant.facts.bits == [4] and variant.facts.block_sizes == [64]
    assert all(q.has_zero_points for q in variant.facts.quantized)  # HQQ is asymmetric
    assert "int4 hqq b64 asym" in variant.statement()
    assert greedy(variant.folder, "Emulating callable objects", 8).strip()


def test_gptq_calibrates_on_text_offline_and_generates(tmp_path, fp32_folder, tiny_llama) -> None:
    config = WeightOnlyConfig("gptq", block_size=32, calibration_text=tiny_llama.train_text[:4000])
    variant = quantize_folder(fp32_folder, tmp_path / "q", config)
    assert len(variant.facts.quantized) == 11 and variant.facts.block_sizes == [32]
    assert variant.matmul_ratio == pytest.approx(expected_ratio(4, 32, True), rel=0.01)
    assert greedy(variant.folder, "The for statement", 8).strip()


def test_quantizing_a_quantized_folder_is_refused_and_leaves_nothing(tmp_path) -> None:
    int4 = llm_models.built_genai_folder(llm_models.TINY, "int4")
    with pytest.raises(UserError, match="no float MatMul weights left to quantize"):
        quantize_folder(int4, tmp_path / "again", WeightOnlyConfig())
    assert not (tmp_path / "again").exists()


def test_without_a_working_sandbox_quantizing_is_refused_and_leaves_nothing(
    tmp_path, fp32_folder, monkeypatch
) -> None:
    """The quantizer reads every weight of an upload in native code: never outside the sandbox
    (it fell back to a plain child, which sees the data folder and the environment)."""
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(tmp_path / "no-bwrap"))
    with pytest.raises(UserError) as refused:
        quantize_folder(fp32_folder, tmp_path / "int4", WeightOnlyConfig())
    assert str(refused.value) == (
        "Weight-only quantizations are refused here because the bubblewrap sandbox "
        f"({str(tmp_path / 'no-bwrap')!r}) is not installed; install the Debian package "
        "bubblewrap or set OPTIBOARD_BWRAP to its path (the quantizer reads the uploaded model's "
        "weights in native code, and GPTQ runs the model)."
    )
    assert not (tmp_path / "int4").exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"algorithm": "awq"}, "not offered"),
        ({"algorithm": "hqq", "bits": 8}, "HQQ does not make 8-bit"),
        ({"algorithm": "gptq"}, "GPTQ needs calibration text"),
        ({"block_size": 48}, "Block size 48 is not supported"),
        ({"accuracy_level": 7}, "Accuracy level 7"),
    ],
)
def test_bad_weight_only_settings_get_one_sentence(kwargs, message) -> None:
    with pytest.raises(UserError, match=message):
        WeightOnlyConfig(**kwargs)
