"""INT8 explanations on ONNX Runtime profiles state what really ran: the int8 kernels' share by
op type, float islands named after the uploaded op (never after an int8 kernel), and layer-wise
accuracy loss only where the FP32 model has the same tensors. Real models, real quantizer, real
profiler."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

from backend.engine import evidence, layerloss
from backend.engine.inputs import input_specs_of, random_inputs, value_ranges
from backend.engine.profile import CONVERSION_OPS, Profile, profile_model
from backend.engine.variants import build_variant
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration
from tests import models as model_factory
from tests.evidence_models import (
    make_bad_layer_mlp,
    make_hardswish_net,
    make_mobilenet_v3_style,
    torch_names,
)

LABEL = "INT8 static (QDQ)"


def _profile(source: Path, built: Path, dims: tuple[tuple[str, int], ...] = ()) -> Profile:
    feed = random_inputs(
        input_specs_of(source), 1, dict(dims), count=1, seed=7, ranges=value_ranges(source)
    )[0]
    return profile_model(built, onnx.load(str(source)), SessionOptions.plain(), feed)


def _static(source: Path, workdir: Path, dims: tuple[tuple[str, int], ...] = ()) -> Profile:
    variant = build_variant(
        source, Configuration(precision="int8_static", symbolic_dims=dims), workdir
    )
    return _profile(source, variant.path, dims)


def test_an_ort_profile_states_the_share_of_time_in_int8_kernels_by_op_type(
    tmp_path: Path,
) -> None:
    source = model_factory.save(make_hardswish_net(), tmp_path / "hs.onnx")
    profile = _static(source, tmp_path)
    int8 = [n for n in profile.nodes if n.op_type.startswith(("QLinear", "QGemm"))]
    assert int8, "the static INT8 graph ran no QLinear/QGemm kernel"
    computing = [n for n in profile.nodes if n.op_type not in CONVERSION_OPS]
    line = evidence.precision_line(profile, LABEL)
    assert line is not None
    assert line.startswith(
        f"{profile.share(int8):.0%} of {LABEL} time ran int8 kernels "
        f"({len(int8)} of {len(computing)} computing nodes: "
    )
    assert "(0 of 0" not in line and "QLinearConv" in line
    assert line in evidence.facts(profile, LABEL, 0.8)


def test_dynamic_int8_kernels_count_as_int8(tmp_path: Path) -> None:
    source = model_factory.save(model_factory.make_mlp(), tmp_path / "mlp.onnx")
    variant = build_variant(source, Configuration(precision="int8_dynamic"), tmp_path)
    profile = _profile(source, variant.path)
    int8 = [n for n in profile.nodes if "Integer" in n.op_type or "DynamicQuantize" in n.op_type]
    int8 = [n for n in int8 if n.op_type != "DynamicQuantizeLinear"]  # that one converts
    assert int8
    line = evidence.precision_line(profile, "INT8 dynamic")
    assert line is not None and line.startswith(f"{profile.share(int8):.0%} of INT8 dynamic time")
    assert f"({len(int8)} of " in line


def test_qgemm_counts_as_an_int8_kernel_never_as_a_float_island(tmp_path: Path) -> None:
    """MatMul + Add fuse into Gemm before quantizing, and ORT runs it as QGemm."""
    source = model_factory.save(model_factory.make_mlp(), tmp_path / "mlp.onnx")
    profile = _static(source, tmp_path)
    qgemm = profile.of_op("QGemm")
    assert qgemm, "no QGemm ran"
    line = evidence.precision_line(profile, LABEL)
    assert line is not None and "QGemm" in line.split("computing nodes: ")[1].split(")")[0]
    for island in evidence.float_islands(profile):
        assert "QGemm" not in {n.op_type for n in island.nodes}


def test_a_profile_without_op_types_says_it_cannot_tell(tmp_path: Path) -> None:
    source = model_factory.save(make_hardswish_net(blocks=2), tmp_path / "hs.onnx")
    profile = _static(source, tmp_path)
    for node in profile.nodes:  # as a trace whose events carry no op_name gives it
        if node.op_type not in CONVERSION_OPS:
            node.op_type = "?"
    line = evidence.precision_line(profile, LABEL)
    assert line is not None and "names no kernel" in line and "0 of 0" not in line


@pytest.mark.parametrize("named", [False, True], ids=["onnx-names", "torch-names"])
def test_hardswish_split_into_hardsigmoid_and_mul_is_named_hardswish(
    tmp_path: Path, named: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_mobilenet_v3_style(width=16, blocks=2, image=32)
    source = model_factory.save(torch_names(model) if named else model, tmp_path / "mnv3.onnx")
    profile = _static(source, tmp_path)
    islands = evidence.float_islands(profile)
    hardswish = next(i for i in islands if i.op_type == "HardSwish")
    uploaded = [n for n in onnx.load(str(source)).graph.node if n.op_type == "HardSwish"]
    assert len(hardswish.sources) == len(uploaded)
    assert {n.op_type for n in hardswish.nodes} == {"HardSigmoid"}  # the float part
    assert {n.op_type for n in hardswish.int8_nodes} == {"QLinearMul"}  # the int8 part
    assert "Conv" not in {i.op_type for i in islands}
    for island in islands:  # an int8 kernel is never a float island's op or one of its nodes
        assert not evidence.runs_in_int8(island.op_type)
        assert not any(evidence.runs_in_int8(n.op_type) for n in island.nodes)
    monkeypatch.setattr(evidence, "MIN_SHARE", 0.0)  # every island, however small here
    lines = evidence.island_lines(profile, LABEL, 0.8)
    line = next(line for line in lines if "HardSwish nodes" in line)
    assert (
        f"{len(uploaded)} HardSwish nodes that have no int8 kernel here: they run in float "
        "(as HardSigmoid; ONNX Runtime splits each into HardSigmoid + QLinearMul, and only "
        "QLinearMul runs in int8)"
    ) in line
    assert not any("Conv nodes that" in line for line in lines)


class _Reader(CalibrationDataReader):
    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self.feeds = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.feeds, None)


def test_a_matmul_left_in_float_is_not_said_to_lack_an_int8_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """quantize_static told to leave one MatMul out: the others run QLinearMatMul, so the
    sentence says it ran in float although the others ran int8 kernels."""
    source = model_factory.save(
        torch_names(make_bad_layer_mlp(), "/bert/encoder"), tmp_path / "m.onnx"
    )
    left_out = "/bert/encoder/features.6/MatMul"
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.normal(size=(1, 32)).astype(np.float32)} for _ in range(8)]
    built = tmp_path / "qdq.onnx"
    quantize_static(
        str(source),
        str(built),
        _Reader(feeds),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=[left_out],
    )
    profile = _profile(source, built)
    island = next(i for i in evidence.float_islands(profile) if left_out in i.sources)
    assert island.op_type == "MatMul" and island.quantized_elsewhere == 2
    assert {n.op_type for n in island.nodes} == {"MatMul"}
    monkeypatch.setattr(evidence, "MIN_SHARE", 0.0)  # every island, however small here
    lines = evidence.island_lines(profile, LABEL, 0.8)
    line = next(line for line in lines if "MatMul nodes" in line)
    assert "1 MatMul node that ran in float although 2 other MatMul nodes ran int8 kernels" in line
    assert "no int8 kernel" not in line and "QLinearMatMul" not in line


def test_layer_loss_ranks_only_nodes_whose_inputs_the_fp32_model_has(tmp_path: Path) -> None:
    """The encoder's attention MatMul and Softmax stay FP32 behind inserted Clips: they read
    tensors the FP32 model has not got, so they are not comparable and never ranked (they used
    to score an assumed perfect 100 dB input and lead the ranking with ~60 dB lost)."""
    source = model_factory.save(
        model_factory.make_transformer(d_model=32, heads=4, vocab=50), tmp_path / "enc.onnx"
    )
    dims = (("seq", 16),)
    variant = build_variant(
        source, Configuration(precision="int8_static", symbolic_dims=dims), tmp_path
    )
    feeds = random_inputs(
        input_specs_of(source), 1, dict(dims), count=4, seed=7, ranges=value_ranges(source)
    )
    ranking = layerloss.rank_nodes(source, variant.path, feeds)
    assert ranking
    float_model = onnx.load(str(source))
    tensors = {t for n in float_model.graph.node for t in n.output}
    tensors |= {i.name for i in float_model.graph.input}
    tensors |= {i.name for i in float_model.graph.initializer}
    qdq = {n.name: n for n in onnx.load(str(variant.path)).graph.node}
    for loss in ranking:
        for tensor in qdq[loss.node].input:
            if tensor:
                produced = tensor.removesuffix("_DequantizeLinear_Output")
                assert produced in tensors, (
                    f"{loss.node} ({loss.op_type}) was ranked though it reads {tensor}"
                )
    assert all(loss.loss_db < 60 for loss in ranking if loss.op_type != "Gather")


def test_the_search_keeps_a_split_hardswish_in_fp32_by_its_built_names(tmp_path: Path) -> None:
    """The mixed-precision search's speed step for the HardSwish island keeps its HardSigmoid
    and its Mul (the uploaded HardSwish is no node of the built graph) and the build takes
    them: the islands' conversions are gone."""
    from backend.engine.mixed import island_candidates

    source = model_factory.save(
        torch_names(make_mobilenet_v3_style(width=16, blocks=1, image=32)), tmp_path / "m.onnx"
    )
    variant = build_variant(source, Configuration(precision="int8_static"), tmp_path)
    profile = _profile(source, variant.path)
    built = {n.name for n in onnx.load(str(variant.path)).graph.node}
    candidates = dict(island_candidates(profile, built))
    keep = candidates["HardSwish"]
    ops = {n.name: n.op_type for n in onnx.load(str(variant.path)).graph.node}
    assert {ops[name] for name in keep} == {"HardSigmoid", "Mul"}
    mixed = Configuration(precision="int8_static", fp32_nodes=tuple(keep))
    kept = build_variant(source, mixed, tmp_path / "mixed")
    after = _profile(source, kept.path)
    assert "HardSwish" not in {i.op_type for i in evidence.float_islands(after)}


def test_conversions_next_to_a_kept_node_are_not_said_to_be_kept_in_fp32(tmp_path: Path) -> None:
    """Torch names: 'MatMul_output_0_QuantizeLinear' strips down to the kept MatMul's name,
    but a QuantizeLinear is a conversion, not a node kept in FP32."""
    encoder = torch_names(model_factory.make_transformer(d_model=32, heads=4, vocab=50), "/enc")
    source = model_factory.save(encoder, tmp_path / "enc.onnx")
    profile = _static(source, tmp_path, (("seq", 16),))
    kept = [n for n in profile.nodes if profile.is_kept(n)]
    assert kept and {n.op_type for n in kept} <= {"MatMul", "Softmax", "Clip"}
    line = evidence.kept_line(profile, LABEL)
    assert line is not None and "QuantizeLinear" not in line
