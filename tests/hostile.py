"""Builders for hostile uploads, shared by tests and bench/hostile_inputs.py.

Each builder writes one file the way an attacker would craft it (raw zip records where `zipfile`
would refuse to write the lie) and returns its path. Nothing here is ever run by the app.
"""

from __future__ import annotations

import io
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests import models

ORT_MEMORY_MARKER = "*/_ORT_MEM_ADDR_/*"

# ---- raw zip records ------------------------------------------------------------------------

_POLY = 0xEDB88320


def _multmodp(a: int, b: int) -> int:
    """a * b modulo the CRC-32 polynomial (zlib's multmodp), for combining CRCs."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if a & (m - 1) == 0:
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _x8n(length: int) -> int:
    """x^(8*length) modulo the polynomial: the operator that shifts a CRC past `length` bytes."""
    square, result = 1 << 30, 1 << 31  # x^1 and x^0
    n = length * 8
    while n:
        if n & 1:
            result = _multmodp(square, result)
        square = _multmodp(square, square)
        n >>= 1
    return result


def _local(name: bytes, crc: int, csize: int, usize: int, method: int = 8) -> bytes:
    return (
        struct.pack(
            "<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, csize, usize, len(name), 0
        )
        + name
    )


def _central(
    name: bytes, crc: int, csize: int, usize: int, offset: int, method: int = 8, mode: int = 0
) -> bytes:
    return (
        struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            0x031E,  # made by Unix, so the mode in external_attr counts
            20,
            0,
            method,
            0,
            0x21,
            crc,
            csize,
            usize,
            len(name),
            0,
            0,
            0,
            0,
            mode << 16,
            offset,
        )
        + name
    )


def _end(entries: int, cd_size: int, cd_offset: int) -> bytes:
    return struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, entries, entries, cd_size, cd_offset, 0)


def overlapping_zip(path: Path, entries: int = 8000, kernel_bytes: int = 1 << 20) -> Path:
    """~0.8 MB, `entries` members whose data is the next member's header plus one shared block.

    Each member's deflate stream first quotes the next local header in a stored block, so all
    members end in the same compressed kernel: the archive stays small while the members
    together unpack to entries x (kernel + headers) bytes. CRCs are correct (combined, not
    computed over gigabytes), so a reader that trusts the directory extracts it all.
    """
    kernel_plain_crc = zlib.crc32(bytes(kernel_bytes))
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    kernel = squeeze.compress(bytes(kernel_bytes)) + squeeze.flush()
    names = [f"m{i:05d}.bin".encode() for i in range(entries)]
    # Work backwards: the last member is just the kernel; each earlier one quotes the next header.
    crcs, usizes, csizes = [0] * entries, [0] * entries, [0] * entries
    headers: list[bytes] = [b""] * entries
    crc, usize, csize = kernel_plain_crc, kernel_bytes, len(kernel)
    shift = _x8n(usize)  # kept equal to _x8n(usize) incrementally: one product per member
    for i in range(entries - 1, -1, -1):
        crcs[i], usizes[i], csizes[i] = crc, usize, csize
        headers[i] = _local(names[i], crc, csize, usize)
        quoted = headers[i]
        block = struct.pack("<BHH", 0, len(quoted), len(quoted) ^ 0xFFFF) + quoted
        # crc(quoted || rest) = crc(quoted) shifted past len(rest), xor crc(rest).
        crc = _multmodp(shift, zlib.crc32(quoted)) ^ crc
        shift = _multmodp(shift, _x8n(len(quoted)))
        usize += len(quoted)
        csize += len(block)
    body = io.BytesIO()
    offsets = []
    for i in range(entries):
        offsets.append(body.tell())
        body.write(headers[i])
        if i + 1 < entries:
            quoted = headers[i + 1]
            body.write(struct.pack("<BHH", 0, len(quoted), len(quoted) ^ 0xFFFF))
    body.write(kernel)
    cd_offset = body.tell()
    for i in range(entries):
        body.write(_central(names[i], crcs[i], csizes[i], usizes[i], offsets[i]))
    body.write(_end(entries, body.tell() - cd_offset, cd_offset))
    Path(path).write_bytes(body.getvalue())
    return Path(path)


def _stored_entries(count: int, prefix: str = "f") -> tuple[bytes, bytes, int]:
    """(local records, central records, count) of `count` empty stored files."""
    local, central = io.BytesIO(), io.BytesIO()
    for i in range(count):
        name = f"{prefix}{i}".encode()
        offset = local.tell()
        local.write(_local(name, 0, 0, 0, method=0))
        central.write(_central(name, 0, 0, 0, offset, method=0))
    return local.getvalue(), central.getvalue(), count


def huge_directory_zip(path: Path, entries: int = 200_000) -> Path:
    """Many empty entries: a few MB whose directory alone takes zipfile seconds to parse."""
    local, central, count = _stored_entries(entries)
    if count > 0xFFFF:  # more than 65535 entries need ZIP64 end records
        tail = _zip64_tail(count, len(central), len(local))
    else:
        tail = _end(count, len(central), len(local))
    Path(path).write_bytes(local + central + tail)
    return Path(path)


def _zip64_tail(
    entries: int, cd_size: int, cd_offset: int, locator_offset: int | None = None
) -> bytes:
    record_at = cd_offset + cd_size
    record = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, cd_size, cd_offset
    )
    where = record_at if locator_offset is None else locator_offset
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, where, 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return record + locator + end


def zip64_count_lie_zip(path: Path, real_entries: int = 50_000) -> Path:
    """ZIP64 records claim one entry while the directory holds tens of thousands."""
    local, central, _count = _stored_entries(real_entries)
    Path(path).write_bytes(local + central + _zip64_tail(1, len(central), len(local)))
    return Path(path)


def zip64_locator_lie_zip(path: Path) -> Path:
    """A ZIP64 locator pointing far past the end of the file."""
    local, central, count = _stored_entries(3)
    tail = _zip64_tail(count, len(central), len(local), locator_offset=1 << 40)
    Path(path).write_bytes(local + central + tail)
    return Path(path)


def zip64_size_lie_zip(path: Path) -> Path:
    """One 10-byte member whose ZIP64 extra field declares a 1 TiB uncompressed size."""
    data = b"0123456789"
    name = b"model.data"
    extra = struct.pack("<HHQQ", 0x0001, 16, 1 << 40, len(data))
    crc = zlib.crc32(data)
    local = (
        struct.pack(
            "<4s5H3L2H",
            b"PK\x03\x04",
            45,
            0,
            0,
            0,
            0x21,
            crc,
            0xFFFFFFFF,
            0xFFFFFFFF,
            len(name),
            len(extra),
        )
        + name
        + extra
        + data
    )
    central = (
        struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            0x031E,
            45,
            0,
            0,
            0,
            0x21,
            crc,
            0xFFFFFFFF,
            0xFFFFFFFF,
            len(name),
            len(extra),
            0,
            0,
            0,
            0,
            0,
        )
        + name
        + extra
    )
    Path(path).write_bytes(local + central + _end(1, len(central), len(local)))
    return Path(path)


def directory_offset_lie_zip(path: Path) -> Path:
    """An end record whose directory offset points past the end of the file."""
    local, central, count = _stored_entries(2)
    Path(path).write_bytes(local + central + _end(count, len(central), 1 << 31))
    return Path(path)


def long_names_zip(path: Path, entries: int = 2, name_bytes: int = 60_000) -> Path:
    """Entries with ~64 KB names: few entries, yet a directory zipfile must read whole."""
    local, central = io.BytesIO(), io.BytesIO()
    for i in range(entries):
        name = f"{i}".encode().ljust(name_bytes, b"a")
        offset = local.tell()
        local.write(_local(name, 0, 0, 0, method=0))
        central.write(_central(name, 0, 0, 0, offset, method=0))
    tail = _end(entries, central.tell(), local.tell())
    Path(path).write_bytes(local.getvalue() + central.getvalue() + tail)
    return Path(path)


def zip_bomb(path: Path, megabytes: int = 64) -> Path:
    """One member of zeros: ~1000x compression."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("model.onnx", "w", force_zip64=True) as out:
            block = bytes(1 << 20)
            for _ in range(megabytes):
                out.write(block)
    return Path(path)


def _single_entry(path: Path, info: zipfile.ZipInfo, data: bytes) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ok/readme.txt", b"hello")
        archive.writestr(info, data)
    return Path(path)


def traversal_zip(path: Path) -> Path:
    return _single_entry(path, zipfile.ZipInfo("../../evil.onnx"), b"x")


def absolute_path_zip(path: Path) -> Path:
    return _single_entry(path, zipfile.ZipInfo("/tmp/evil.onnx"), b"x")


def symlink_zip(path: Path, target: str = "/etc/passwd") -> Path:
    info = zipfile.ZipInfo("model.onnx")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return _single_entry(path, info, target.encode())


def declared_total_zip(path: Path, members: int = 12, member_bytes: int = 1 << 20) -> Path:
    """Incompressible members whose declared sizes add up past a small cap (set in the test)."""
    rng = np.random.default_rng(0)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for i in range(members):
            archive.writestr(f"part{i}.bin", rng.bytes(member_bytes))
    return Path(path)


# ---- hostile models -------------------------------------------------------------------------


def _external(tensor: TensorProto, location: str, offset: int = 0, length: int = 64) -> None:
    """Point `tensor` at external bytes, dropping its inline data."""
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


def _float_tensor(name: str, count: int = 16) -> TensorProto:
    return numpy_helper.from_array(np.arange(count, dtype=np.float32), name)


def _wrap(
    graph: onnx.GraphProto, functions: list[onnx.FunctionProto] | None = None
) -> onnx.ModelProto:
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", models.OPSET), helper.make_opsetid("local", 1)],
        functions=functions or [],
        producer_name="optiboard-hostile",
    )
    model.ir_version = 8
    return model


def _identity_graph(
    nodes: list[onnx.NodeProto], out: str = "y", inits: list[TensorProto] | None = None
) -> onnx.GraphProto:
    return helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [16])],
        inits or [],
    )


def external_in_initializer(location: str = "weights.bin") -> onnx.ModelProto:
    w = _float_tensor("w")
    _external(w, location)
    return _wrap(_identity_graph([helper.make_node("Add", ["x", "w"], ["y"])], inits=[w]))


def external_in_sparse_initializer(location: str = "weights.bin") -> onnx.ModelProto:
    values = _float_tensor("s", 4)
    _external(values, location, length=16)
    indices = numpy_helper.from_array(np.array([0, 3, 7, 9], dtype=np.int64), "s_idx")
    sparse = helper.make_sparse_tensor(values, indices, [16])
    graph = _identity_graph([helper.make_node("Add", ["x", "s"], ["y"])])
    graph.sparse_initializer.append(sparse)
    return _wrap(graph)


def external_in_constant_attribute(location: str = "weights.bin") -> onnx.ModelProto:
    value = _float_tensor("c")
    _external(value, location)
    nodes = [
        helper.make_node("Constant", [], ["c"], value=value),
        helper.make_node("Add", ["x", "c"], ["y"]),
    ]
    return _wrap(_identity_graph(nodes))


def external_in_subgraph(location: str = "weights.bin") -> onnx.ModelProto:
    """An If whose then-branch holds an external initializer."""
    inner = _float_tensor("w_then")
    _external(inner, location)
    then_graph = helper.make_graph(
        [helper.make_node("Identity", ["w_then"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [16])],
        [inner],
    )
    else_graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [16])],
    )
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [
        helper.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph)
    ]
    return _wrap(_identity_graph(nodes, inits=[cond]))


def external_in_function(location: str = "weights.bin") -> onnx.ModelProto:
    """A model-local function whose Constant node's tensor is external."""
    value = _float_tensor("k")
    _external(value, location)
    function = helper.make_function(
        "local",
        "AddK",
        ["a"],
        ["b"],
        [
            helper.make_node("Constant", [], ["k"], value=value),
            helper.make_node("Add", ["a", "k"], ["b"]),
        ],
        opset_imports=[helper.make_opsetid("", models.OPSET)],
    )
    graph = _identity_graph([helper.make_node("AddK", ["x"], ["y"], domain="local")])
    return _wrap(graph, [function])


def external_in_tensors_attribute(location: str = "weights.bin") -> onnx.ModelProto:
    """A TENSORS attribute (on a custom-domain node) holding an external tensor."""
    value = _float_tensor("t")
    _external(value, location)
    node = helper.make_node("Holder", ["x"], ["y"], domain="com.acme")
    node.attribute.append(helper.make_attribute("blobs", [value]))
    model = _wrap(_identity_graph([node]))
    model.opset_import.append(helper.make_opsetid("com.acme", 1))
    return model


EXTERNAL_PLACES: dict[str, Callable[[str], onnx.ModelProto]] = {
    "initializer": external_in_initializer,
    "sparse initializer": external_in_sparse_initializer,
    "Constant attribute": external_in_constant_attribute,
    "If subgraph": external_in_subgraph,
    "model-local function": external_in_function,
    "TENSORS attribute": external_in_tensors_attribute,
}


def save_model(model: onnx.ModelProto, path: Path) -> Path:
    """Write the proto as is (onnx.save would try to resolve external data)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def zip_model_with_data(
    model: onnx.ModelProto, path: Path, data: bytes = bytes(64), data_name: str = "weights.bin"
) -> Path:
    """A zip holding model.onnx and its data file side by side."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("model.onnx", model.SerializeToString())
        if data_name:
            archive.writestr(data_name, data)
    return Path(path)


def external_data_outside_zip(path: Path) -> Path:
    """A zipped model whose function tensor reads ../../../etc/passwd."""
    return zip_model_with_data(external_in_function("../../../../etc/passwd"), path, data_name="")


def constant_of_shape_bomb(path: Path) -> Path:
    """~200 bytes that ask for a 400 GB float tensor when folded or run."""
    shape = numpy_helper.from_array(np.array([100_000, 100_000, 10], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("Constant", [], ["shape"], value=shape),
        helper.make_node("ConstantOfShape", ["shape"], ["big"], value=_float_tensor("one", 1)),
        helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
        helper.make_node("Add", ["x", "s"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "bomb",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    return save_model(_wrap(graph), path)


def cost_bomb(path: Path) -> Path:
    """A tiny model whose shape inference allocates seq^2 integers: Shape(x) -> Concat(s, s) ->
    ConstantOfShape (int64) over x of shape [1, seq] (uint8, seq bytes). A NonZero -> Neg branch
    leaves a shape ONNX cannot infer, so ONNX Runtime's symbolic inference runs too, and that one
    materialises the ConstantOfShape output: seq = 10,000 is 800 MB, seq = 20,000 3.2 GB."""
    one = helper.make_tensor("one", TensorProto.INT64, [1], [1])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Concat", ["s", "s"], ["s2"], axis=0),
        helper.make_node("ConstantOfShape", ["s2"], ["c"], value=one),
        helper.make_node("ReduceSum", ["c"], ["y"], keepdims=0),
        helper.make_node("NonZero", ["x"], ["nz"]),
        helper.make_node("Neg", ["nz"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "cost_bomb",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, "seq"])],
        [
            helper.make_tensor_value_info("y", TensorProto.INT64, []),
            helper.make_tensor_value_info("z", TensorProto.INT64, [2, "found"]),
        ],
    )
    return save_model(_wrap(graph), path)


# An input name that, written into config.pbtxt unescaped, closes its tensor block and adds a
# model-level EXECUTION_ENV_PATH parameter (Triton's Python backend unpacks that archive and runs
# the model in it), then opens a second input block that the real one's fields complete.
INJECTED_NAME = (
    'x" data_type: TYPE_FP32 dims: [ 4 ] } ] parameters { key: "EXECUTION_ENV_PATH" value { '
    'string_value: "$$TRITON_MODEL_DIRECTORY/evil.tar.gz" } } input [ { name: "x2'
)
# A file name that Markdown would draw as a link and a remote image.
MARKDOWN_NAME = "[click me](http://evil.test/phish) ![pixel](http://evil.test/pixel.png)"


def injected_name_model(path: Path) -> Path:
    """y = x + 1 over x of shape [N, 4], with x named INJECTED_NAME."""
    one = numpy_helper.from_array(np.ones((1,), np.float32), "one")
    graph = helper.make_graph(
        [helper.make_node("Add", [INJECTED_NAME, "one"], ["y"])],
        "injected",
        [helper.make_tensor_value_info(INJECTED_NAME, TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [one],
    )
    return save_model(_wrap(graph), path)


def huge_symbolic_dim_model(path: Path) -> Path:
    """An MLP whose batch axis is declared as 10^9 (64 GB of float input)."""
    model = models.make_mlp(features=16)
    model.graph.input[0].type.tensor_type.shape.dim[0].ClearField("dim_param")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 10**9
    return save_model(model, path)


def calibration_npz_bomb(
    path: Path,
    shape: tuple[int, ...] = (2048, 1, 256, 256),
    name: str = "x",
    descr: str = "<f4",
    extra: dict[str, np.ndarray] | None = None,
) -> Path:
    """A ~0.5 MB .npz whose one deflated array of zeros unpacks to 512 MiB (by default); `extra`
    arrays are stored beside it as they are."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    total = int(np.prod(shape)) * np.dtype(descr).itemsize
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for key, array in (extra or {}).items():
            with archive.open(f"{key}.npy", "w") as out:
                np.lib.format.write_array(out, array)
        with archive.open(f"{name}.npy", "w", force_zip64=True) as out:
            out.write(header.getvalue())
            block = bytes(1 << 22)
            for start in range(0, total, len(block)):
                out.write(block[: min(len(block), total - start)])
    return Path(path)


class _OpensCanary:
    """Unpickling this calls open(canary, "w"): proof that a pickle was loaded."""

    def __init__(self, canary: Path) -> None:
        self.canary = canary

    def __reduce__(self) -> tuple:
        return (open, (str(self.canary), "w"))


def pickled_labels_npz(path: Path, inputs: dict[str, np.ndarray], canary: Path) -> Path:
    """An evaluation .npz whose labels are an object array: loading it with allow_pickle
    unpickles a payload that creates `canary`."""
    labels = np.empty(1, dtype=object)
    labels[0] = _OpensCanary(canary)
    np.savez(path, labels=labels, **inputs)  # numpy pickles object arrays when saving
    return Path(path)


def image_model(path: Path) -> Path:
    """x [N,1,256,256] float -> GlobalAveragePool -> Flatten -> y [N,1]: the inputs the .npz
    bombs declare, so their checks reach the arrays."""
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["p"]),
        helper.make_node("Flatten", ["p"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "image",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 256, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
    )
    return save_model(_wrap(graph), path)


def pytorch_uploads(folder: Path, canary: Path) -> dict[str, Path]:
    """Hostile and refused PyTorch uploads (needs torch; tests/torch_models builds them): a .pt2
    whose sample-inputs pickle writes `canary`, one whose size expression sympy would eval, a
    TorchScript .pt, a pickled module, a .pt2 with a 64 MB zero member, and a plain CNN .pt2."""
    import os

    from tests import torch_models

    folder.mkdir(parents=True, exist_ok=True)
    plain = torch_models.save_linear_pt2(folder / "linear.pt2")

    def expression(graph: dict) -> None:
        graph["graph_module"]["graph"]["sym_int_values"] = {
            "s0": {"as_expr": {"expr_str": f"__import__('os').system('touch {canary}')"}}
        }

    bomb = torch_models.rewrite(plain, folder / "bomb.pt2", lambda name, data: data)
    with zipfile.ZipFile(bomb, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("linear/extra/zeros.txt", b"\0" * (64 << 20))
    return {
        "crafted.pt2": torch_models.with_hostile_sample_inputs(
            plain, folder / "crafted.pt2", torch_models.RunsCode(os.system, f"touch {canary}")
        ),
        "eval.pt2": torch_models.with_graph(plain, folder / "eval.pt2", expression),
        "scripted.pt": torch_models.save_torchscript(folder / "scripted.pt"),
        "module.pt": torch_models.save_pickled_module(folder / "module.pt"),
        "bomb.pt2": bomb,
        "cnn.pt2": torch_models.save_cnn_pt2(folder / "cnn.pt2"),
    }
