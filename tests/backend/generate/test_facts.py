"""What a GenAI decoder graph declares it computes and caches in (facts.decoder_types), read from
real graphs built with onnx.helper: the logits' and past keys' element types and MatMulNBits'
accuracy levels, and the facts a point of ONNX Runtime GenAI then states per device."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from backend.errors import UserError
from backend.generate.facts import DecoderTypes, decoder_types


def _decoder(path: Path, dtype: int, levels: tuple[int, ...]) -> Path:
    """A graph shaped like a GenAI decoder's interface: ids and past key/values in, logits and
    present key/values out, with a MatMulNBits per accuracy level."""
    nodes = [helper.make_node("Identity", ["past_key_values.0.key"], ["present.0.key"])]
    nodes += [
        helper.make_node(
            "MatMulNBits", ["h", "w", "s"], [f"m{i}"], domain="com.microsoft",
            K=32, N=8, bits=4, block_size=32, accuracy_level=level,
        )
        for i, level in enumerate(levels)
    ]  # fmt: skip
    nodes.append(helper.make_node("Identity", ["h"], ["logits"]))
    graph = helper.make_graph(
        nodes,
        "decoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "s"]),
            helper.make_tensor_value_info("h", dtype, [1, 32]),
            helper.make_tensor_value_info("past_key_values.0.key", dtype, [1, 2, "p", 8]),
        ],
        [
            helper.make_tensor_value_info("logits", dtype, [1, 32]),
            helper.make_tensor_value_info("present.0.key", dtype, [1, 2, "p", 8]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


def test_an_fp16_decoder_states_fp16_and_no_int8_compute(tmp_path: Path) -> None:
    types = decoder_types(_decoder(tmp_path / "model.onnx", TensorProto.FLOAT16, ()))
    assert types == DecoderTypes(logits="fp16", kv_cache="fp16", accuracy_levels=())
    assert types.facts("cuda") == {
        "inference_precision": "fp16",
        "kv_cache_precision": "fp16",
        "precision_from": "the graph's logits and past key/value types",
    }


def test_int4_matmuls_at_accuracy_level_4_compute_int8_activations_on_cpu(tmp_path: Path) -> None:
    types = decoder_types(_decoder(tmp_path / "model.onnx", TensorProto.FLOAT, (4, 4, 0)))
    assert (types.logits, types.kv_cache, types.accuracy_levels) == ("fp32", "fp32", (0, 4))
    assert types.facts("cpu")["int4_compute"] == "MatMulNBits at accuracy level 4: int8 activations"
    assert "int4_compute" not in types.facts("cuda")  # the CUDA kernel ignores the level


@pytest.mark.parametrize("size", [64, 17 << 20])  # read here, and in the limited child
def test_a_decoder_that_is_no_graph_is_one_sentence_either_way(tmp_path: Path, size: int) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes((b"\xff\xfe not protobuf " * (size // 16 + 1))[:size])
    with pytest.raises(UserError, match="model.onnx does not read as an ONNX graph"):
        decoder_types(bad)
