"""Small real ONNX models built with onnx.helper, shared by tests and bench/."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests import tf_models, tfchild

OPSET = 17


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array.astype(np.float32), name)


def _finish(graph: onnx.GraphProto, opset: int = OPSET) -> onnx.ModelProto:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="optiboard-tests"
    )
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def save(model: onnx.ModelProto, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def make_mlp(
    features: int = 16, hidden: int = 32, classes: int = 10, seed: int = 0
) -> onnx.ModelProto:
    """Gemm-Relu-Gemm-Softmax with a dynamic batch axis named N."""
    rng = np.random.default_rng(seed)
    inits = [
        _init("w1", rng.normal(0, 0.3, (features, hidden))),
        _init("b1", rng.normal(0, 0.1, (hidden,))),
        _init("w2", rng.normal(0, 0.3, (hidden, classes))),
        _init("b2", rng.normal(0, 0.1, (classes,))),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["l0"]),
        helper.make_node("Add", ["l0", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", classes])],
        inits,
    )
    return _finish(graph)


def make_cnn(
    channels: int = 32, blocks: int = 2, image: int = 32, classes: int = 10, seed: int = 0
) -> onnx.ModelProto:
    """A ResNet-style CNN: conv stem, residual blocks (conv-relu-conv + skip), pool, FC."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def conv(inp: str, out: str, cin: int, cout: int, k: int = 3, stride: int = 1) -> None:
        w = f"{out}_w"
        b = f"{out}_b"
        scale = np.sqrt(2.0 / (cin * k * k))
        inits.append(_init(w, rng.normal(0, scale, (cout, cin, k, k))))
        inits.append(_init(b, rng.normal(0, 0.01, (cout,))))
        pad = k // 2
        nodes.append(
            helper.make_node(
                "Conv",
                [inp, w, b],
                [out],
                kernel_shape=[k, k],
                pads=[pad] * 4,
                strides=[stride, stride],
            )
        )

    conv("input", "stem", 3, channels)
    nodes.append(helper.make_node("Relu", ["stem"], ["x0"]))
    current = "x0"
    for i in range(blocks):
        conv(current, f"b{i}c1", channels, channels)
        nodes.append(helper.make_node("Relu", [f"b{i}c1"], [f"b{i}r1"]))
        conv(f"b{i}r1", f"b{i}c2", channels, channels)
        nodes.append(helper.make_node("Add", [f"b{i}c2", current], [f"b{i}sum"]))
        nodes.append(helper.make_node("Relu", [f"b{i}sum"], [f"x{i + 1}"]))
        current = f"x{i + 1}"
    nodes.append(helper.make_node("GlobalAveragePool", [current], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"], axis=1))
    inits.append(_init("fc_w", rng.normal(0, 0.2, (classes, channels))))
    inits.append(_init("fc_b", rng.normal(0, 0.01, (classes,))))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1))
    graph = helper.make_graph(
        nodes,
        "resnet_style_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, image, image])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        inits,
    )
    return _finish(graph)


def make_transformer(
    d_model: int = 32, heads: int = 4, vocab: int = 50, seed: int = 0
) -> onnx.ModelProto:
    """One encoder block: embedding Gather, self-attention, LayerNorm, FFN; dims batch and seq."""
    rng = np.random.default_rng(seed)
    head = d_model // heads
    inits = [
        _init("embed", rng.normal(0, 0.5, (vocab, d_model))),
        _init("wq", rng.normal(0, 0.2, (d_model, d_model))),
        _init("wk", rng.normal(0, 0.2, (d_model, d_model))),
        _init("wv", rng.normal(0, 0.2, (d_model, d_model))),
        _init("wo", rng.normal(0, 0.2, (d_model, d_model))),
        _init("ln_scale", np.ones(d_model)),
        _init("ln_bias", np.zeros(d_model)),
        _init("ff1", rng.normal(0, 0.2, (d_model, 4 * d_model))),
        _init("ff2", rng.normal(0, 0.2, (4 * d_model, d_model))),
        _init("attn_scale", np.array(1.0 / np.sqrt(head))),
        numpy_helper.from_array(np.array([0, 0, heads, head], dtype=np.int64), "split_shape"),
        numpy_helper.from_array(np.array([0, 0, d_model], dtype=np.int64), "merge_shape"),
    ]
    n = helper.make_node
    nodes = [
        n("Gather", ["embed", "tokens"], ["h"], axis=0),
        n("MatMul", ["h", "wq"], ["q0"]),
        n("MatMul", ["h", "wk"], ["k0"]),
        n("MatMul", ["h", "wv"], ["v0"]),
        n("Reshape", ["q0", "split_shape"], ["q1"]),
        n("Reshape", ["k0", "split_shape"], ["k1"]),
        n("Reshape", ["v0", "split_shape"], ["v1"]),
        n("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        n("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        n("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kt"], ["scores0"]),
        n("Mul", ["scores0", "attn_scale"], ["scores"]),
        n("Softmax", ["scores"], ["attn"], axis=-1),
        n("MatMul", ["attn", "v"], ["ctx0"]),
        n("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx1", "merge_shape"], ["ctx"]),
        n("MatMul", ["ctx", "wo"], ["attn_out"]),
        n("Add", ["attn_out", "h"], ["res1"]),
        n("LayerNormalization", ["res1", "ln_scale", "ln_bias"], ["norm1"], axis=-1),
        n("MatMul", ["norm1", "ff1"], ["ff_h0"]),
        n("Relu", ["ff_h0"], ["ff_h"]),
        n("MatMul", ["ff_h", "ff2"], ["ff_out"]),
        n("Add", ["ff_out", "norm1"], ["hidden"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_transformer",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", d_model])],
        inits,
    )
    return _finish(graph)


# ---- ingestion builders (custom ops, external data, TensorFlow SavedModels, zips) -------------


def make_custom_op_model(domain: str = "com.acme", op_type: str = "MyOp") -> onnx.ModelProto:
    """Relu followed by one op from a custom domain that no runtime knows."""
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="relu"),
        helper.make_node(op_type, ["h"], ["y"], name="custom", domain=domain),
    ]
    graph = helper.make_graph(
        nodes,
        "custom_op",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(domain, 1)],
        producer_name="optiboard-tests",
    )
    model.ir_version = 8
    return model


def save_with_external_data(
    model: onnx.ModelProto, directory: Path, stem: str = "model", location: str = "model.data"
) -> Path:
    """Save `model` as stem.onnx plus every tensor in one external data file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.onnx"
    onnx.save(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=0,
    )
    return path


def npz_bytes(**arrays: np.ndarray) -> bytes:
    """An .npz upload's bytes (a calibration or evaluation set), as np.savez writes them."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def zip_folder(
    folder: Path, zip_path: Path, top: str | None = None, drop: tuple[str, ...] = ()
) -> Path:
    """Zip every file under `folder` but those named in `drop`, optionally inside a top folder
    named `top`."""
    import zipfile

    folder, zip_path = Path(folder), Path(zip_path)
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file() and file.name not in drop:
                name = file.relative_to(folder).as_posix()
                archive.write(file, f"{top}/{name}" if top else name)
    return zip_path


def save_dense_savedmodel(
    directory: Path, features: int = 8, units: int = 4, seed: int = 0
) -> Path:
    """A TF SavedModel: relu(x @ w + b) with a serving_default signature over [None, features]
    (built by TensorFlow in a child process: tests/tfchild.py says why)."""
    return tfchild.in_child(tf_models.save_dense_savedmodel, Path(directory), features, units, seed)


def save_savedmodel_without_signatures(directory: Path) -> Path:
    """A TF SavedModel whose only tf.function is not exported as a signature (built in a child)."""
    return tfchild.in_child(tf_models.save_savedmodel_without_signatures, Path(directory))


def make_cuda_fallback_model() -> onnx.ModelProto:
    """Relu -> Hardmax -> Add: Hardmax has a CPU kernel but none on CUDA, so it falls back."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Hardmax", ["r"], ["h"], axis=-1),
        helper.make_node("Add", ["h", "r"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "cuda_fallback",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
    )
    return _finish(graph)


def save_hostile_savedmodel(directory: Path, canary: Path) -> Path:
    """A SavedModel whose resource initializer (run by TensorFlow at load time) copies the loading
    process's environment into `canary`; a valid model otherwise (y = x + 1). Built in a child."""
    return tfchild.in_child(tf_models.save_hostile_savedmodel, Path(directory), Path(canary))


def make_constant_of_shape_bomb(side: int = 40_000) -> onnx.ModelProto:
    """~200 bytes whose ConstantOfShape makes a side x side float tensor (6.4 GB at 40,000)."""
    shape = numpy_helper.from_array(np.array([side, side], dtype=np.int64), "shape")
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["big"], value=one),
        helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
        helper.make_node("Add", ["x", "total"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "bomb",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [shape],
    )
    return _finish(graph)


def make_symbolic_dim_model() -> onnx.ModelProto:
    """y = x + 1 over x of shape [N, seq] with a symbolic `seq` the user must give a value."""
    one = _init("one", np.ones((1,), np.float32))
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"])],
        "symbolic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "seq"])],
        [one],
    )
    return _finish(graph)


def make_computed_reshape(features: int = 8, classes: int = 4) -> onnx.ModelProto:
    """y = reshape(x, [N, -1]) @ w, the target shape computed from x's own (Shape, Gather,
    Concat): ONNX's shape inference leaves the reshaped dimensions unknown."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape_of_x"]),
        helper.make_node("Gather", ["shape_of_x", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch_1d"]),
        helper.make_node("Concat", ["batch_1d", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
    ]
    weights = [
        helper.make_tensor("zero", TensorProto.INT64, [], [0]),
        helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
        helper.make_tensor("minus_one", TensorProto.INT64, [1], [-1]),
        _init("w", np.random.default_rng(0).standard_normal((4 * features, classes))),
    ]
    graph = helper.make_graph(
        nodes,
        "computed_reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", classes])],
        weights,
    )
    return _finish(graph)


def make_fp16_wrong_model(nan: bool = True, features: int = 8) -> onnx.ModelProto:
    """Finite in FP32, wrong in FP16: y = (x*c1 - x*c2) / (c1 - c2) with c1 = 1e5, c2 = 99999.

    FP32 gives y = x. The FP16 conversion clamps both constants to 1e4 (float16's range ends at
    65504), so x*c1 - x*c2 is 0 and the division is 0/0: every output value is NaN. With
    nan=False the division is left out and FP16's output is all zeros (cosine 0 against FP32).
    """
    inits = [_init("c1", np.array(1e5)), _init("c2", np.array(99999.0))]
    nodes = [
        helper.make_node("Mul", ["x", "c1"], ["a"]),
        helper.make_node("Mul", ["x", "c2"], ["b"]),
        helper.make_node("Sub", ["a", "b"], ["d" if nan else "y"]),
    ]
    if nan:
        nodes += [
            helper.make_node("Sub", ["c1", "c2"], ["k"]),
            helper.make_node("Div", ["d", "k"], ["y"]),
        ]
    graph = helper.make_graph(
        nodes,
        "fp16_wrong",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", features])],
        inits,
    )
    return _finish(graph)


def make_saturating_int8_matmul(depth: int = 64, columns: int = 4) -> onnx.ModelProto:
    """A QDQ MatMul whose U8S8 sums saturate on x86 without VNNI: x = 1 quantizes to uint8 255,
    every weight is int8 127, so each pair of products adds to 64,770, past int16's 32,767.
    Exact math gives `depth` in every output (x of ones); saturated pairs give about half."""
    scalars = {
        "sx": np.array(1 / 255, np.float32),
        "zx": np.array(0, np.uint8),
        "sw": np.array(1 / 127, np.float32),
        "zw": np.array(0, np.int8),
        "sy": np.array(0.5, np.float32),
        "zy": np.array(0, np.uint8),
    }
    weights = np.full((depth, columns), 127, np.int8)
    inits = [numpy_helper.from_array(v, k) for k, v in scalars.items()]
    inits.append(numpy_helper.from_array(weights, "wq"))
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"]),
        helper.make_node("MatMul", ["xd", "wd"], ["y0"]),
        helper.make_node("QuantizeLinear", ["y0", "sy", "zy"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "saturating_int8",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", depth])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", columns])],
        inits,
    )
    return _finish(graph)


def plant_matmul_chain(
    model: onnx.ModelProto, links: int = 8, side: int = 256, seed: int = 1
) -> onnx.ModelProto:
    """The model with a planted regression: a chain of `links` [side, side] MatMuls on a tile of
    its first input, reduced, multiplied by zero and added to its first output, so the outputs
    stay the same (x * 0 is not folded: it depends on the input) while every run pays for the
    chain. For checking that a regression check finds a slowdown and names MatMul."""
    planted = onnx.ModelProto.FromString(model.SerializeToString())
    graph = planted.graph
    rng = np.random.default_rng(seed)
    first_in, first_out = graph.input[0].name, graph.output[0].name
    out_dtype = graph.output[0].type.tensor_type.elem_type
    nodes = [
        helper.make_node("ReduceMean", [first_in], ["planted_mean"], keepdims=0),
        helper.make_node("Expand", ["planted_mean", "planted_shape"], ["planted_0"]),
    ]
    inits = [numpy_helper.from_array(np.array([side, side], np.int64), "planted_shape")]
    for i in range(links):
        weight = rng.normal(0, 1 / np.sqrt(side), (side, side))
        inits.append(_init(f"planted_w{i}", weight))
        nodes.append(
            helper.make_node("MatMul", [f"planted_{i}", f"planted_w{i}"], [f"planted_{i + 1}"])
        )
    nodes += [
        helper.make_node("ReduceSum", [f"planted_{links}"], ["planted_sum"], keepdims=0),
        helper.make_node("Mul", ["planted_sum", "planted_zero"], ["planted_nothing"]),
        helper.make_node("Cast", ["planted_nothing"], ["planted_cast"], to=out_dtype),
    ]
    inits.append(_init("planted_zero", np.zeros((), np.float32)))
    for node in graph.node:  # the first output is now made under another name, then + 0
        for k, name in enumerate(node.output):
            if name == first_out:
                node.output[k] = "planted_before"
    nodes.append(helper.make_node("Add", ["planted_before", "planted_cast"], [first_out]))
    graph.node.extend(nodes)
    graph.initializer.extend(inits)
    onnx.checker.check_model(planted, full_check=True)
    return planted


def make_unnamed_if(features: int = 16, classes: int = 8) -> onnx.ModelProto:
    """The walkthrough's control-flow model, every node unnamed: ReduceSum_0 -> Greater_1 ->
    If_2 (then_branch: MatMul_0 reading `wt`, an initializer of the main graph read only there;
    else_branch: Neg_0 -> Sigmoid_1) -> Relu_3 -> MatMul_4 -> Add_5. Relu_3's output is "r"."""
    rng = np.random.default_rng(1)
    branch_out = ["N", features]
    then_branch = helper.make_graph(
        [helper.make_node("MatMul", ["x", "wt"], ["t_out"])],
        "then_g",
        [],
        [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, branch_out)],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e0"]), helper.make_node("Sigmoid", ["e0"], ["e_out"])],
        "else_g",
        [],
        [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, branch_out)],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["cond"]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Relu", ["y"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "unnamed_if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", classes])],
        [
            _init("zero", np.zeros(())),
            _init("wt", rng.normal(0, 0.3, (features, features))),
            _init("w", rng.normal(0, 0.3, (features, classes))),
            _init("b", rng.normal(0, 0.1, (classes,))),
        ],
    )
    return _finish(graph)


def make_named_if(side: int = 192) -> onnx.ModelProto:
    """ReduceSum -> Greater -> If (then: MatMul -> Tanh; else: Neg) -> Relu -> Add, every node
    named (the branch nodes too, so a test knows them without the profile's word); `side`: the
    then branch's MatMul, heavy enough to be most of the If's time by default."""
    rng = np.random.default_rng(3)
    out = [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, ["N", side])]
    then_g = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "wt"], ["t0"], name="then_matmul"),
            helper.make_node("Tanh", ["t0"], ["t_out"], name="then_tanh"),
        ],
        "then_g",
        [],
        out,
    )
    else_out = [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, ["N", side])]
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e_out"], name="else_neg")], "else_g", [], else_out
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
        helper.make_node("Greater", ["s", "zero"], ["cond"], name="positive"),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g, name="if"),
        helper.make_node("Relu", ["y"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "b"], ["out"], name="add"),
    ]
    weights = [
        numpy_helper.from_array(np.zeros((), np.float32), "zero"),
        numpy_helper.from_array(rng.normal(0, 0.1, (side, side)).astype(np.float32), "wt"),
        numpy_helper.from_array(rng.normal(0, 0.1, (side,)).astype(np.float32), "b"),
    ]
    graph = helper.make_graph(
        nodes,
        "if_shares",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", side])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", side])],
        weights,
    )
    return _finish(graph)
