"""Explanations computed from a real profile, and where a real INT8 model loses accuracy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from backend.engine import evidence, layerloss
from backend.engine.explain import RULE_OF_THUMB, explain
from backend.engine.profile import Profile, profile_model
from backend.engine.variants import build_variant
from backend.models.inspect import op_histogram
from backend.results import AccuracyReport
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, Precision
from tests import models as model_factory
from tests.evidence_models import BAD_LAYER, make_bad_layer_mlp, make_hardswish_net

VNNI_CPU = {"avx2": True, "avx512f": True, "avx512_vnni": True, "amx": False}
BLOCKS = 5
CPU = SessionOptions.plain()  # ORT's CPU provider, defaults


@pytest.fixture
def hardswish_int8(tmp_path: Path) -> tuple[Path, Profile]:
    source = model_factory.save(make_hardswish_net(blocks=BLOCKS), tmp_path / "hs.onnx")
    variant = build_variant(source, Configuration(precision="int8_static"), tmp_path)
    feed = {"input": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)}
    return source, profile_model(variant.path, onnx.load(str(source)), CPU, feed)


def test_explanation_names_the_op_without_int8_kernel_with_the_profiles_numbers(
    hardswish_int8: tuple[Path, Profile],
) -> None:
    source, profile = hardswish_int8
    ops = op_histogram(onnx.load(str(source)))
    lines = explain(Precision.INT8_STATIC, "cpu", 0.8, ops, VNNI_CPU, profile=profile)
    island = evidence.float_islands(profile)[0]
    assert island.op_type == "HardSwish" and len(island.sources) == BLOCKS
    share, converting = island.share(profile), island.conversion_share(profile)
    expected = (
        f"{share:.0%} of INT8 static (QDQ) time is in {BLOCKS} HardSwish nodes that have no "
        f"int8 kernel here: they run in float"
    )
    line = next(line for line in lines if "HardSwish" in line)
    assert line.startswith(expected)
    assert f"({converting:.0%} of the time)" in line
    assert f"{0.8 / (1 - converting):.2f}x" in line  # the prediction follows from the shares
    assert not any(RULE_OF_THUMB in line for line in lines)
    assert any(line.startswith("INT8 static (QDQ) time by op type: ") for line in lines)


def test_without_a_profile_the_old_rules_say_they_are_rules_of_thumb() -> None:
    ops = {"Conv": 4, "QuantizeLinear": 10, "DequantizeLinear": 12}
    lines = explain(Precision.INT8_STATIC, "cpu", 0.6, ops, VNNI_CPU)
    assert len(lines) == 1 and lines[0].endswith(RULE_OF_THUMB)
    assert "its 22 Quantize/DequantizeLinear nodes" in lines[0]


def test_profile_diff_names_the_uploaded_nodes_that_changed(
    hardswish_int8: tuple[Path, Profile], tmp_path: Path
) -> None:
    source, int8 = hardswish_int8
    variant = build_variant(source, Configuration(precision="fp32"), tmp_path / "fp32")
    feed = {"input": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)}
    fp32 = profile_model(variant.path, onnx.load(str(source)), CPU, feed)
    lines = evidence.faster_slower(fp32, int8)
    named = {f"{n.op_type}_{i}" for i, n in enumerate(onnx.load(str(source)).graph.node)}
    assert lines and all(line.split(":")[0] in named for line in lines)


def test_accuracy_ranking_puts_the_badly_quantizing_layer_first(tmp_path: Path) -> None:
    source = model_factory.save(make_bad_layer_mlp(), tmp_path / "bad.onnx")
    variant = build_variant(source, Configuration(precision="int8_static"), tmp_path)
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.normal(size=(1, 32)).astype(np.float32)} for _ in range(4)]
    ranking = layerloss.rank_nodes(source, variant.path, feeds)
    worst = ranking[0]
    assert worst.node.split("/")[0] == BAD_LAYER
    assert worst.loss_db > 2 * ranking[1].loss_db  # by construction it dominates
    report = AccuracyReport(max_abs_error=1.0, mean_rel_error=0.5, cosine_similarity=0.7)
    lines = explain(Precision.INT8_STATIC, "cpu", None, {}, VNNI_CPU, report, losses=ranking)
    assert len(lines) == 1 and f"mostly at {worst.node} ({worst.op_type})" in lines[0]
    assert f"SQNR {worst.input_sqnr_db:.0f} -> {worst.output_sqnr_db:.0f} dB" in lines[0]
    assert layerloss.from_dicts(layerloss.to_dicts(ranking)) == ranking[:10]


def test_nodes_kept_in_fp32_on_purpose_are_not_blamed_on_missing_kernels(tmp_path: Path) -> None:
    source = model_factory.save(make_bad_layer_mlp(), tmp_path / "bad.onnx")
    config = Configuration(precision="int8_static", fp32_nodes=(BAD_LAYER,))
    variant = build_variant(source, config, tmp_path)
    feed = {"x": np.random.default_rng(0).normal(size=(1, 32)).astype(np.float32)}
    profile = profile_model(variant.path, onnx.load(str(source)), CPU, feed)
    assert [k.split("/")[0] for k in profile.kept_in_fp32] == [BAD_LAYER]
    kept = [n for n in profile.nodes if profile.is_kept(n)]
    assert kept and all(BAD_LAYER in n.source_nodes for n in kept)
    # it really runs in float: ORT's fusions would otherwise re-quantize it (QGemm)
    assert [n.op_type for n in kept if n.name.startswith(BAD_LAYER)] == ["Gemm"]
    assert not any(BAD_LAYER in i.sources for i in evidence.float_islands(profile))
    line = evidence.kept_line(profile, "INT8")
    assert line == (
        f"2 INT8 nodes were kept in FP32 on purpose (Clip, Gemm); they take "
        f"{profile.share(kept):.0%} of the time."
    )
    assert Profile.from_dict(profile.to_dict()).kept_in_fp32 == profile.kept_in_fp32


def test_an_island_whose_conversions_were_counted_elsewhere_claims_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = model_factory.save(
        model_factory.make_transformer(d_model=32, heads=4, vocab=50), tmp_path / "enc.onnx"
    )
    config = Configuration(precision="int8_dynamic", symbolic_dims=(("seq", 16),))
    variant = build_variant(source, config, tmp_path)
    feed = {"tokens": np.random.default_rng(0).integers(0, 50, (1, 16), dtype=np.int64)}
    profile = profile_model(variant.path, onnx.load(str(source)), CPU, feed)
    islands = {i.op_type: i for i in evidence.float_islands(profile)}
    # the embedding's weights are dequantized on every run, next to a float Gather
    assert [n.op_type for n in islands["Gather"].conversions] == ["DequantizeLinear"]
    assert islands["LayerNormalization"].conversions == []  # its DQ was the Gather's
    monkeypatch.setattr(evidence, "MIN_SHARE", 0.0)
    lines = evidence.island_lines(profile, "INT8 dynamic", 0.8)
    norm = next(line for line in lines if "LayerNormalization node" in line)
    assert norm.endswith(  # one node: singular
        "in 1 LayerNormalization node that has no int8 kernel here: it runs in float (as "
        "SkipLayerNormalization)."
    )
