"""Small real models whose INT8 trouble is known by construction, for the evidence tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.models import OPSET


def _f32(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def _model(nodes: list, name: str, inputs: list, outputs: list, inits: list) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def make_hardswish_net(
    channels: int = 16, blocks: int = 6, image: int = 32, classes: int = 10, seed: int = 0
) -> onnx.ModelProto:
    """1x1 Conv -> HardSwish blocks: HardSwish has no int8 kernel, so INT8 wraps each in Q/DQ."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    current, cin = "input", 3
    for i in range(blocks):
        inits.append(_f32(f"c{i}_w", rng.normal(0, np.sqrt(2 / cin), (channels, cin, 1, 1))))
        inits.append(_f32(f"c{i}_b", rng.normal(0, 0.01, (channels,))))
        nodes.append(helper.make_node("Conv", [current, f"c{i}_w", f"c{i}_b"], [f"c{i}"]))
        nodes.append(helper.make_node("HardSwish", [f"c{i}"], [f"a{i}"]))
        current, cin = f"a{i}", channels
    nodes.append(helper.make_node("GlobalAveragePool", [current], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"], axis=1))
    inits.append(_f32("fc_w", rng.normal(0, 0.3, (classes, channels))))
    inits.append(_f32("fc_b", np.zeros(classes)))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1))
    return _model(
        nodes,
        "hardswish_net",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, image, image])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        inits,
    )


BAD_LAYER = "bad_matmul"


def make_bad_layer_mlp(
    features: int = 32, hidden: int = 64, classes: int = 10, seed: int = 0
) -> onnx.ModelProto:
    """Three dense layers; the middle one (named BAD_LAYER) quantizes badly by construction.

    Its weights hold one huge row for an input feature that is always zero: harmless in float,
    but int8 weight scales set by that row round every other weight to zero.
    """
    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 0.3, (features, hidden))
    b1 = rng.normal(0, 0.1, (hidden,))
    w1[:, 0], b1[0] = 0.0, -1.0  # feature 0 of h is always 0 after Relu
    w2 = rng.normal(0, 0.3, (hidden, hidden))
    w2[0, :] = 1000.0
    inits = [
        _f32("w1", w1),
        _f32("b1", b1),
        _f32("w2", w2),
        _f32("b2", rng.normal(0, 0.1, (hidden,))),
        _f32("w3", rng.normal(0, 0.3, (hidden, classes))),
        _f32("b3", rng.normal(0, 0.1, (classes,))),
    ]
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "w1"], ["m1"], name="dense1"),
        n("Add", ["m1", "b1"], ["z1"], name="bias1"),
        n("Relu", ["z1"], ["h1"], name="relu1"),
        n("MatMul", ["h1", "w2"], ["m2"], name=BAD_LAYER),
        n("Add", ["m2", "b2"], ["z2"], name="bias2"),
        n("Relu", ["z2"], ["h2"], name="relu2"),
        n("MatMul", ["h2", "w3"], ["m3"], name="dense3"),
        n("Add", ["m3", "b3"], ["logits"], name="bias3"),
    ]
    return _model(
        nodes,
        "bad_layer_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])],
        inits,
    )


def make_mobilenet_v3_style(
    width: int = 32, blocks: int = 4, image: int = 96, classes: int = 100, seed: int = 0
) -> onnx.ModelProto:
    """Stem conv, then inverted residual blocks (1x1 expand, HardSwish, 3x3 depthwise, HardSwish,
    squeeze-excite with HardSigmoid, 1x1 project, residual add), pool, classifier."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def weight(name: str, shape: tuple[int, ...], fan_in: int) -> str:
        array = rng.normal(0, np.sqrt(2.0 / fan_in), shape).astype(np.float32)
        inits.append(numpy_helper.from_array(array, name))
        return name

    def conv(x: str, out: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
        w = weight(f"{out}_w", (cout, cin // group, k, k), cin // group * k * k)
        b = weight(f"{out}_b", (cout,), 1000)
        pads = [k // 2] * 4
        nodes.append(
            helper.make_node(
                "Conv", [x, w, b], [out], kernel_shape=[k, k], strides=[stride] * 2,
                pads=pads, group=group,
            )
        )  # fmt: skip
        return out

    def act(x: str, out: str) -> str:
        nodes.append(helper.make_node("HardSwish", [x], [out]))
        return out

    current = act(conv("input", "stem", 3, width, 3, stride=2), "stem_a")
    for i in range(blocks):
        wide = width * 4
        e = act(conv(current, f"b{i}_expand", width, wide, 1), f"b{i}_ea")
        d = act(conv(e, f"b{i}_dw", wide, wide, 3, group=wide), f"b{i}_da")
        nodes.append(helper.make_node("GlobalAveragePool", [d], [f"b{i}_sq"]))
        s1 = conv(f"b{i}_sq", f"b{i}_se1", wide, wide // 4, 1)
        nodes.append(helper.make_node("Relu", [s1], [f"b{i}_se1a"]))
        s2 = conv(f"b{i}_se1a", f"b{i}_se2", wide // 4, wide, 1)
        nodes.append(helper.make_node("HardSigmoid", [s2], [f"b{i}_gate"]))
        nodes.append(helper.make_node("Mul", [d, f"b{i}_gate"], [f"b{i}_se"]))
        p = conv(f"b{i}_se", f"b{i}_project", wide, width, 1)
        nodes.append(helper.make_node("Add", [p, current], [f"b{i}_out"]))
        current = f"b{i}_out"
    nodes.append(helper.make_node("GlobalAveragePool", [current], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"], axis=1))
    fc = weight("fc_w", (classes, width), width)
    inits.append(numpy_helper.from_array(np.zeros(classes, np.float32), "fc_b"))
    nodes.append(helper.make_node("Gemm", ["flat", fc, "fc_b"], ["logits"], transB=1))
    graph = helper.make_graph(
        nodes,
        "mobilenet_v3_style",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, image, image])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def torch_names(model: onnx.ModelProto, scope: str = "/features") -> onnx.ModelProto:
    """Name nodes and tensors as torch.onnx.export does ('/features/features.3/Conv', tensor
    '/features/features.3/Conv_output_0'), in place: the names ORT's quantizer and optimizers
    derive from them end in '_output_0_DequantizeLinear_Output' and the like."""
    graph = model.graph
    fixed = {t.name for t in graph.input} | {t.name for t in graph.output}
    fixed |= {t.name for t in graph.initializer}
    renamed: dict[str, str] = {}
    for index, node in enumerate(graph.node):
        node.name = f"{scope}/features.{index}/{node.op_type}"
        for k, out in enumerate(node.output):
            if out not in fixed:
                renamed[out] = f"{node.name}_output_{k}"
    for node in graph.node:
        node.input[:] = [renamed.get(t, t) for t in node.input]
        node.output[:] = [renamed.get(t, t) for t in node.output]
    onnx.checker.check_model(model, full_check=True)
    return model
