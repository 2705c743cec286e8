"""The Triton model repository writer: layout and config.pbtxt, for the local server and export.

The local server loads a Python-backend model that runs ONNX Runtime on the file (the pytriton
wheel ships only the Python backend; the batching, Triton's dynamic batcher and instance groups,
is Triton's own either way). An exported repository (export.py) is written by the same functions
for Triton's onnxruntime backend (a `Deployment`), so what is exported and what the local server
measured share their tensors, batching and instance group and cannot drift apart.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf import text_format
from onnx import numpy_helper
from tritonclient.grpc import model_config_pb2

from backend.engine.inputs import specs_of_model
from backend.errors import UserError
from backend.models.graphread import load_graph, parse_graph
from backend.runtimes import exact_int8_matmul_setting
from backend.serving.types import BatchingPolicy, ServingProvider
from backend.specs import check_threads

MODEL_NAME = "model"
# cuDNN's algorithm search for the served CUDA model. ORT's default, EXHAUSTIVE, re-benchmarked
# on the H200 whenever the batch size changed between executions (dynamic batching interleaves
# them): ~75 ms per batched execution against 0.7 ms at a steady batch 1
# (bench/results/h200_triton.txt; onnxruntime issue 23006). HEURISTIC skips the benchmark.
CUDA_CONV_ALGO_SEARCH = "HEURISTIC"
TEMPLATE = Path(__file__).with_name("triton_model.py.txt")
_TRITON_TYPES = {
    "float32": "FP32",
    "float16": "FP16",
    "float64": "FP64",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "uint8": "UINT8",
    "bool": "BOOL",
}


@dataclass(frozen=True)
class TensorSpec:
    """One input or output as Triton sees it: dims without the batch axis when batching."""

    name: str
    dtype: str  # numpy name
    dims: tuple[int, ...]

    @property
    def triton_type(self) -> str:
        return _TRITON_TYPES[self.dtype]


FIXED_BATCH_NOTE = "Dynamic batching is impossible"  # how a fixed-batch server's note begins


@dataclass(frozen=True)
class ServedModel:
    """What is served: tensors, the policy actually applied, ORT's threads, and why if changed."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    policy: BatchingPolicy
    max_batch_size: int  # what config.pbtxt says: 0 for a fixed-batch server
    intra_op_threads: int
    fixed_batch_note: str = ""
    provider: ServingProvider = ServingProvider.CPU  # the local model's ORT provider
    onnxruntime_path: str = ""  # a runtime environment's onnxruntime overlay (runtime_overlay.py)
    # ONNX Runtime session config entries the Python backend sets, as a sweep's default session
    # sets them on this CPU: exact int8 matmuls where it lacks VNNI (backend/runtimes/ort_int8.py)
    session_config: tuple[tuple[str, str], ...] = ()


def _tensor(name: str, dtype: str, shape: list, batched: bool, dims: dict[str, int]) -> TensorSpec:
    if dtype not in _TRITON_TYPES:
        raise UserError(f"Tensor {name!r} has type {dtype}, which the served model cannot carry.")
    rest = shape[1:] if batched else shape
    concrete = []
    for dim in rest:
        if isinstance(dim, int):
            concrete.append(dim)
        elif dim in dims:
            concrete.append(dims[dim])
        elif dim is None:
            raise UserError(
                f"{name!r} has a dimension with neither size nor name; fix its shape in the model."
            )
        else:
            raise UserError(
                f"Dimension {dim!r} of {name!r} has no size; give it with --dim {dim}=SIZE."
            )
    return TensorSpec(name, dtype, tuple(concrete))


def _outputs(model: onnx.ModelProto) -> list[dict]:
    specs = []
    for value in model.graph.output:
        elem = value.type.tensor_type.elem_type
        dims = [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in value.type.tensor_type.shape.dim
        ]
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)).name
        specs.append({"name": value.name, "dtype": dtype, "shape": dims})
    return specs


def plan_model(
    model_path: Path,
    policy: BatchingPolicy,
    dims: dict[str, int] | None = None,
    intra_op_threads: int | None = None,
    variable_dims: bool = False,
    provider: ServingProvider = ServingProvider.CPU,
) -> ServedModel:
    """Read the ONNX graph (no session) and decide what Triton serves.

    A batch axis fixed to a number makes dynamic batching impossible: the model is then served
    as a fixed-batch server (max_batch_size 0), and fixed_batch_note says why. variable_dims
    (export): an input dimension without a size becomes -1 instead of an error, since no load
    generator has to build requests for it.
    """
    check_threads(intra_op_threads or 0)
    graph = read_graph_io(model_path)
    inputs, outputs = graph["inputs"], graph["outputs"]
    if not inputs:
        raise UserError("The model has no inputs to send requests to; it cannot be served.")
    fixed = _unbatched(inputs)
    note, first = "", None
    if fixed:  # a scalar input or a numeric first axis: requests cannot be stacked
        first = fixed[0]["shape"][0] if fixed[0]["shape"] else None
        axis = f"its batch dimension fixed at {first}" if first is not None else "no batch axis"
        note = (
            f"{FIXED_BATCH_NOTE}: input {fixed[0]['name']!r} has {axis}, so Triton "
            "cannot stack requests; it is served as a fixed-batch server (max_batch_size 0, one "
            "request per execution)."
        )
        policy = BatchingPolicy(
            max_batch_size=first if first else 1,
            dynamic_batching=False,
            instance_count=policy.instance_count,
        )
    batched = not fixed
    threads = intra_op_threads or max(1, (os.cpu_count() or 1) // policy.instance_count)
    named = dict(dims or {})
    int8 = exact_int8_matmul_setting() if graph["saturable"] else None
    return ServedModel(
        name=MODEL_NAME,
        inputs=tuple(
            _tensor(
                s["name"], s["dtype"], s["shape"], batched, _input_dims(s, named, variable_dims)
            )
            for s in inputs
        ),
        outputs=tuple(
            _tensor(s["name"], s["dtype"], s["shape"], batched, _output_dims(s, named))
            for s in outputs
        ),
        policy=policy,
        max_batch_size=policy.max_batch_size if batched else 0,
        intra_op_threads=threads,
        fixed_batch_note=note,
        provider=ServingProvider(provider),
        session_config=(int8,) if int8 else (),
    )


def _saturable(model: onnx.ModelProto) -> bool:
    """Whether the graph holds int8 weights past +-64, whose U8S8 sums can saturate on a CPU
    without VNNI (7-bit weights, reduce_range, cannot; weights kept outside count as such)."""
    for weight in model.graph.initializer:
        if weight.data_type != onnx.TensorProto.INT8:
            continue
        if weight.data_location == onnx.TensorProto.EXTERNAL:
            return True
        values = numpy_helper.to_array(weight).astype(np.int16)
        if values.size and int(np.abs(values).max()) > 64:
            return True
    return False


def _unbatched(inputs: list[dict]) -> list[dict]:
    """The inputs whose first axis is a number (or that have none): requests cannot stack."""
    return [s for s in inputs if not s["shape"] or isinstance(s["shape"][0], int)]


def can_batch(model_path: Path) -> bool:
    """Whether Triton can stack requests for this file (every input's batch axis is symbolic);
    False: plan_model serves it as a fixed-batch server, whatever policy is asked."""
    return inputs_can_batch(read_graph_io(model_path)["inputs"])


def read_graph_io(model_path: Path) -> dict[str, Any]:
    """What serving reads of a graph (inputs, outputs, whether its int8 weights can saturate),
    parsed through models.graphread: a large variant, the child's work on an upload, is parsed
    in a limited child, not in the worker or the CLI."""
    path = Path(model_path)
    what = f"Reading the inputs and outputs of {path.name!r}"
    return parse_graph(path, child_graph_io, what, read=_graph_io)


def _graph_io(answer: Any) -> dict[str, Any]:
    """child_graph_io's answer, checked: tensors with a name, a numpy dtype and a shape of
    sizes, names or None."""
    for tensor in (*answer["inputs"], *answer["outputs"]):
        dims_read = all(d is None or isinstance(d, int | str) for d in tensor["shape"])
        if not (isinstance(tensor["name"], str) and dims_read):
            raise ValueError(f"tensor {tensor!r:.80}")
        np.dtype(tensor["dtype"])
    if not isinstance(answer["saturable"], bool):
        raise TypeError("saturable is not a bool")
    return answer


def child_graph_io(path: str) -> dict[str, Any]:
    model = load_graph(path)
    saturable = _saturable(model)
    return {"inputs": specs_of_model(model), "outputs": _outputs(model), "saturable": saturable}


def inputs_can_batch(inputs: list[dict]) -> bool:
    """can_batch from the inputs' [{name, dtype, shape}], e.g. a library model's, read at ingest
    in the parse child (so the dashboard never parses the upload for it)."""
    return bool(inputs) and not _unbatched(inputs)


def _input_dims(spec: dict, dims: dict[str, int], variable: bool) -> dict[str, int]:
    return _output_dims(spec, dims) if variable else dims


def _output_dims(spec: dict, dims: dict[str, int]) -> dict[str, int]:
    """Outputs may have data-dependent dims: those become -1 (variable) instead of an error."""
    unknown = {d: -1 for d in spec["shape"] if isinstance(d, str) or d is None}
    return {**unknown, **{k: v for k, v in dims.items() if k in unknown}}


def _add_tensors(field: Any, tensors: tuple[TensorSpec, ...]) -> None:
    """Each tensor as a message of the repeated `field` (ModelInput or ModelOutput): its name
    is a string field, whatever characters it holds."""
    for t in tensors:
        message = field.add(
            name=t.name,
            data_type=model_config_pb2.DataType.Value(f"TYPE_{t.triton_type}"),
            dims=list(t.dims) or [1],
        )
        if not t.dims:  # a scalar travels as [1] and reaches the model reshaped to []
            message.reshape.SetInParent()


@dataclass(frozen=True)
class Deployment:
    """An exported repository's server: Triton's onnxruntime backend on CPU or GPU instances,
    with TensorRT at `trt_precision` on GPU (None: no accelerator)."""

    gpu: bool = False
    trt_precision: str | None = None


def _dynamic_batching(config: model_config_pb2.ModelConfig, served: ServedModel) -> None:
    policy = served.policy
    if not (served.max_batch_size and policy.dynamic_batching):
        return
    batching = config.dynamic_batching
    batching.SetInParent()  # present even when every field keeps its default
    batching.preferred_batch_size.extend(policy.preferred_batch_sizes)
    batching.max_queue_delay_microseconds = policy.max_queue_delay_us
    batching.preserve_ordering = policy.preserve_ordering


def _accelerator(config: model_config_pb2.ModelConfig, deployment: Deployment) -> None:
    if not (deployment.gpu and deployment.trt_precision):
        return
    accelerators = config.optimization.execution_accelerators.gpu_execution_accelerator
    tensorrt = accelerators.add(name="tensorrt")
    tensorrt.parameters["precision_mode"] = deployment.trt_precision


def model_config(
    served: ServedModel, deployment: Deployment | None = None
) -> model_config_pb2.ModelConfig:
    """Triton's ModelConfig for the local Python-backend model, or with a Deployment the
    onnxruntime one. A message, never text: a tensor name is a string field, so a crafted name
    (quotes, braces, a `parameters` block) stays that name and adds nothing to the config.

    The tensors, max_batch_size, dynamic_batching block and instance count are set by the same
    lines either way.
    """
    config = model_config_pb2.ModelConfig(name=served.name, max_batch_size=served.max_batch_size)
    if deployment is not None:
        config.platform = "onnxruntime_onnx"
    else:
        config.backend = "python"
    _add_tensors(config.input, served.inputs)
    _add_tensors(config.output, served.outputs)
    group = config.instance_group.add(count=served.policy.instance_count)
    if deployment is not None:
        group.kind = group.KIND_GPU if deployment.gpu else group.KIND_CPU
    elif served.provider is ServingProvider.CUDA:  # pinned to GPU 0, the one the provider opens
        group.kind = group.KIND_GPU
        group.gpus.append(0)
    else:
        group.kind = group.KIND_CPU
    _dynamic_batching(config, served)
    if deployment is None:  # the Python backend reads its ONNX Runtime settings from here
        config.parameters["intra_op_threads"].string_value = str(served.intra_op_threads)
        config.parameters["provider"].string_value = str(served.provider)
        if served.onnxruntime_path:  # first on the stub's sys.path, before onnxruntime's import
            config.parameters["onnxruntime_path"].string_value = served.onnxruntime_path
        for key, value in served.session_config:  # names start "session.": the model sets them
            config.parameters[key].string_value = value
        if served.provider is ServingProvider.CUDA:
            config.parameters["cudnn_conv_algo_search"].string_value = CUDA_CONV_ALGO_SEARCH
    else:
        _accelerator(config, deployment)
    return config


def config_text(served: ServedModel, deployment: Deployment | None = None) -> str:
    """config.pbtxt: model_config printed by protobuf's text format (Triton parses it back)."""
    return text_format.MessageToString(model_config(served, deployment))


def write_repository(
    root: Path, model_path: Path, served: ServedModel, deployment: Deployment | None = None
) -> Path:
    """root/<model>/config.pbtxt and root/<model>/1/model.onnx (and model.py, the Python
    backend's, unless it is a Deployment); returns root."""
    version = root / served.name / "1"
    version.mkdir(parents=True, exist_ok=True)
    (root / served.name / "config.pbtxt").write_text(config_text(served, deployment))
    if deployment is None:
        shutil.copyfile(TEMPLATE, version / "model.py")
    target = version / "model.onnx"
    try:
        os.link(model_path, target)  # same file system: no copy of a large model
    except OSError:
        shutil.copyfile(model_path, target)
    return root
