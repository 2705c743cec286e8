"""ONNX Runtime's own operators (GroupQueryAttention, MatMulNBits, SimplifiedLayerNormalization)
in the Graph page's cost and the Models page's summary: their FLOPs counted, each weight once and
as the weights it represents, and no 'not valid ONNX' warning for ops ONNX Runtime runs.

Each small graph is run by ONNX Runtime first, so it is a graph the runtime accepts, and the tiny
Llama's GenAI folders (tests/llm_models.py, built by the product's model builder) are checked the
same way the walkthrough saw them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from backend.errors import UserError
from backend.models.cost import model_cost
from backend.models.costing import check_dims
from backend.models.inspect import inspect_model
from tests import llm_models

MS = "com.microsoft"
B, S, P, H, HKV, D = 1, 4, 3, 4, 2, 16  # batch, new tokens, past tokens, heads, KV heads, head size
K, N, BLOCK = 64, 32, 32  # MatMulNBits: K x N weights in 4-bit blocks of 32


def _model(nodes, inputs, outputs, inits=(), opset: int = 21) -> onnx.ModelProto:  # noqa: ANN001
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model


def _value(name: str, shape: list, dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def gqa_model() -> onnx.ModelProto:
    """Two GroupQueryAttention layers with rotary embedding sharing one cos/sin cache, as the
    model builder writes them; batch, sequence and past length are free dimensions."""
    rng = np.random.default_rng(0)
    cache = [
        numpy_helper.from_array(rng.random((16, D // 2), np.float32), n) for n in ("cos", "sin")
    ]
    attrs = {"num_heads": H, "kv_num_heads": HKV, "do_rotary": 1}
    nodes = [
        helper.make_node(
            "GroupQueryAttention",
            [q, "k", "v", f"past_k{i}", f"past_v{i}", "seqlens_k", "total", "cos", "sin"],
            [out, f"present_k{i}", f"present_v{i}"],
            domain=MS,
            name=f"gqa{i}",
            **attrs,
        )
        for i, (q, out) in enumerate((("q", "mid"), ("mid", "y")))
    ]
    seq = ["batch", "sequence_length"]
    past = ["batch", HKV, "past_sequence_length", D]
    inputs = [
        _value("q", [*seq, H * D]),
        _value("k", [*seq, HKV * D]),
        _value("v", [*seq, HKV * D]),
        *(_value(f"past_{kv}{i}", past) for i in range(2) for kv in "kv"),
        _value("seqlens_k", ["batch"], TensorProto.INT32),
        _value("total", [1], TensorProto.INT32),
    ]
    present = ["batch", HKV, "total_sequence_length", D]
    outputs = [
        _value("y", [*seq, H * D]),
        *(_value(f"present_{kv}{i}", present) for i in range(2) for kv in "kv"),
    ]
    return _model(nodes, inputs, outputs, cache)


def gqa_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    feeds = {name: rng.random((B, S, width), np.float32) for name, width in
             (("q", H * D), ("k", HKV * D), ("v", HKV * D))}  # fmt: skip
    for i in range(2):
        for kv in "kv":
            feeds[f"past_{kv}{i}"] = rng.random((B, HKV, P, D), np.float32)
    feeds["seqlens_k"] = np.array([P + S - 1], np.int32)
    feeds["total"] = np.array([P + S], np.int32)
    return feeds


def test_group_query_attention_flops_come_from_its_shapes(tmp_path: Path) -> None:
    model = gqa_model()
    assert _run(model, gqa_feeds())[0].shape == (B, S, H * D)

    dims = {"sequence_length": S, "past_sequence_length": P, "total_sequence_length": P + S}
    cost = model_cost(model, B, dims)

    scores = B * H * S * (P + S)  # every query head scores S new tokens against P + S keys
    attention = 2 * scores * D * 2 + 3 * scores  # Q.K^T and .V, then the scaled softmax
    rotary = 3 * B * S * (H + HKV) * D  # x*cos + rotate(x)*sin on the queries and keys
    assert [n.flops for n in cost.nodes] == [attention + rotary] * 2 == [8656, 8656]
    assert all(n.counted for n in cost.nodes) and cost.uncounted_ops == ()


def test_a_shared_initializer_is_one_parameter_set_on_both_pages(tmp_path: Path) -> None:
    model = gqa_model()
    path = tmp_path / "gqa.onnx"
    onnx.save(model, str(path))

    cost = model_cost(path, B, {"sequence_length": S, "past_sequence_length": P,
                                "total_sequence_length": P + S})  # fmt: skip

    assert cost.params == inspect_model(path).parameter_count == 2 * 16 * (D // 2)
    assert [n.params for n in cost.nodes] == [256, 0]  # the cache is charged to its first reader


def matmul_nbits_model() -> onnx.ModelProto:
    """x (1 x 4 x K) times K x N weights that MatMulNBits packs two to a byte of B."""
    rng = np.random.default_rng(2)
    packed = rng.integers(0, 256, (N, K // BLOCK, BLOCK // 2), dtype=np.uint8)
    scales = rng.random(N * (K // BLOCK), np.float32)
    inits = [numpy_helper.from_array(packed, "B"), numpy_helper.from_array(scales, "scales")]
    node = helper.make_node(
        "MatMulNBits", ["x", "B", "scales"], ["y"], domain=MS, K=K, N=N, bits=4, block_size=BLOCK
    )
    return _model([node], [_value("x", [1, 4, K])], [_value("y", [1, 4, N])], inits)


def test_matmul_nbits_counts_the_weights_it_represents_not_its_bytes(tmp_path: Path) -> None:
    model = matmul_nbits_model()
    x = np.random.default_rng(3).random((1, 4, K), np.float32)
    assert _run(model, {"x": x})[0].shape == (1, 4, N)
    path = tmp_path / "nbits.onnx"
    onnx.save(model, str(path))

    meta = inspect_model(path)
    cost = model_cost(path)

    assert meta.parameter_count == cost.params == K * N  # packed storage held 1,024 + 64 scales
    assert cost.flops == 2 * 4 * N * K and cost.uncounted_ops == ()
    assert meta.runtime_ops == ["com.microsoft::MatMulNBits"] and meta.warnings == []


def test_onnx_runtime_attention_with_packed_weights_is_listed_not_misread() -> None:
    """com.microsoft Attention reads (input, QKV weights, bias), not (Q, K, V): no crash, no
    number from the wrong layout, and the op named among those not counted."""
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array(rng.random((32, 96), np.float32), "qkv_w"),
        numpy_helper.from_array(rng.random(96, np.float32), "qkv_b"),
    ]
    node = helper.make_node("Attention", ["x", "qkv_w", "qkv_b"], ["y"], domain=MS, num_heads=2)
    model = _model([node], [_value("x", [1, 4, 32])], [_value("y", [1, 4, 32])], inits)
    assert _run(model, {"x": rng.random((1, 4, 32), np.float32)})[0].shape == (1, 4, 32)

    cost = model_cost(model)

    assert cost.uncounted_ops == ("Attention",) and cost.flops == 0


def simplified_layer_norm_model() -> onnx.ModelProto:
    """ONNX Runtime's RMSNorm in the default domain, where the model builder puts it."""
    scale = numpy_helper.from_array(np.ones(16, np.float32), "gamma")
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "gamma"], ["y"], epsilon=1e-5)
    return _model([node], [_value("x", [2, 16])], [_value("y", [2, 16])], [scale], opset=22)


def test_runtime_ops_in_the_default_domain_are_valid_and_named_not_warned(tmp_path: Path) -> None:
    model = simplified_layer_norm_model()
    x = np.random.default_rng(4).random((2, 16), np.float32)
    assert _run(model, {"x": x})[0].shape == (2, 16)
    path = tmp_path / "rms.onnx"
    onnx.save(model, str(path))

    meta = inspect_model(path)  # strict, as a plain .onnx upload is checked

    assert meta.warnings == []
    assert meta.runtime_ops == ["ai.onnx::SimplifiedLayerNormalization"]
    assert model_cost(path).flops == 4 * 2 * 16
    assert onnx.load(str(path)) == model  # the check left the file as it was


def test_an_op_no_runtime_knows_in_the_default_domain_is_still_refused(tmp_path: Path) -> None:
    node = helper.make_node("NoSuchNormalization", ["x"], ["y"])
    model = _model([node], [_value("x", [2, 16])], [_value("y", [2, 16])], opset=22)
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    with pytest.raises(UserError, match="No Op registered for NoSuchNormalization"):
        inspect_model(path)


@pytest.mark.parametrize("precision", ["fp32", "int4"])
def test_the_tiny_llama_is_summarised_honestly(precision: str) -> None:
    """The walkthrough's model: no warning, GQA and the norms counted, one parameter count."""
    folder = llm_models.built_genai_folder(precision=precision)
    spec = llm_models.TINY
    path = folder / "model.onnx"

    meta = inspect_model(path, "llama.zip: model.onnx", lenient=True)
    dims = {"sequence_length": 16, "past_sequence_length": 1, "total_sequence_length": 17}
    cost = model_cost(path, 1, dims | {"kv_cache_dim": spec.hidden // spec.heads})

    assert meta.warnings == []
    # a prompt's first pass has no past: counted, with less attention than one past token
    check_dims(1, dims | {"past_sequence_length": 0})
    prefill = model_cost(
        path,
        1,
        dims
        | {
            "past_sequence_length": 0,
            "total_sequence_length": 16,
            "kv_cache_dim": spec.hidden // spec.heads,
        },
    )
    assert 0 < prefill.flops < cost.flops
    assert {"com.microsoft::GroupQueryAttention", "ai.onnx::SimplifiedLayerNormalization"} <= set(
        meta.runtime_ops
    )
    weights = spec.layers * (4 * spec.hidden**2 + 3 * spec.hidden * spec.intermediate)
    embeddings = 2 * spec.vocab * spec.hidden  # input embedding and lm_head, not tied
    norms = (2 * spec.layers + 1) * spec.hidden
    rotary = 2 * spec.context * (spec.hidden // spec.heads) // 2  # one shared cos/sin cache
    assert meta.parameter_count == cost.params == weights + embeddings + norms + rotary == 467_584
    assert cost.uncounted_ops == ()
    seq, total, head = 16, 17, spec.hidden // spec.heads
    matmuls = 2 * seq * (weights + spec.vocab * spec.hidden)  # 2 FLOPs a weight a token
    scores = spec.heads * seq * total
    rotary = 3 * seq * (spec.heads + spec.kv_heads) * head
    attention = spec.layers * (4 * scores * head + 3 * scores + rotary)
    rms = seq * spec.hidden * (4 + 5 * 2 * spec.layers)  # one RMSNorm, then residual-add ones
    swiglu = spec.layers * 3 * seq * spec.intermediate  # Sigmoid, x*sigmoid, times up
    mask = total + 1  # the attention mask's ReduceSum and one Sub
    gqa = [n.flops for n in cost.nodes if n.op_type == "GroupQueryAttention"]
    assert sum(gqa) == attention == 309_632
    assert cost.flops == matmuls + attention + rms + swiglu + mask  # same at either precision


def test_free_dimensions_are_all_named_at_once_with_an_example_in_their_names() -> None:
    model = gqa_model()
    with pytest.raises(UserError) as caught:
        model_cost(model, 1)
    message = str(caught.value)
    assert "'sequence_length' and 1 more ('past_sequence_length')" in message
    # values that agree with each other: past 0 for a prompt's first pass, so it counts as given
    assert "(e.g. sequence_length=128, past_sequence_length=0)" in message
    example = dict(pair.split("=") for pair in message.split("(e.g. ")[1].split(")")[0].split(", "))
    assert model_cost(model, 1, {name: int(value) for name, value in example.items()}).flops > 0


def test_a_value_below_the_range_asks_for_a_larger_value() -> None:
    with pytest.raises(UserError, match="past_sequence_length = -1 is outside 0 .*; give a larger"):
        check_dims(1, {"past_sequence_length": -1})
    with pytest.raises(UserError, match="batch size = 0 is outside 1 .*; give a larger"):
        check_dims(0, {})
    with pytest.raises(UserError, match="give a smaller value"):
        check_dims(1, {"sequence_length": 1 << 21})
