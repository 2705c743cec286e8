"""Fixing a model's batch and named dimensions to a configuration's values, before any pass,
and whether ONNX's own shape inference knows every shape of a graph."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import onnx

from backend import ort_tools
from backend.engine.inputs import concrete_shape, specs_of_model
from backend.errors import UserError
from backend.models.graphread import load_graph, parse_graph, strings
from backend.specs import Configuration


def batch_dim_names(model: onnx.ModelProto) -> set[str]:
    names = set()
    for spec in specs_of_model(model):
        if spec["shape"] and isinstance(spec["shape"][0], str):
            names.add(spec["shape"][0])
    return names


def all_dim_params(model: onnx.ModelProto) -> set[str]:
    params = set()
    for value in list(model.graph.input) + list(model.graph.output):
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param:
                params.add(dim.dim_param)
    return params


def dim_params_of(path: Path) -> set[str]:
    """all_dim_params of the .onnx at `path`, parsed through models.graphread (a large one in a
    limited child)."""
    what = f"Reading the dimension names of {path.name!r}"
    return parse_graph(Path(path), child_dim_params, what, read=strings)


def child_dim_params(path: str) -> list[str]:
    return sorted(all_dim_params(load_graph(path)))


def stored_dim_names(*specs: list[dict]) -> set[str]:
    """The named dimensions in a model's stored input and output specs."""
    return {
        dim
        for group in specs
        for spec in group
        for dim in spec["shape"]
        if isinstance(dim, str) and dim not in ("", "?")
    }


def check_dim_names(dims: Iterable[str], known: set[str]) -> None:
    """Refuse dimension values for names the model does not have, naming the ones it has: a
    `--dim seq=128` on a model whose dimension is `sequence` is caught at submit, not mid-job."""
    unknown = sorted(set(dims) - known)
    if unknown:
        names = ", ".join(sorted(known)) or "none"
        raise UserError(
            f"The model has no symbolic dimension {', '.join(map(repr, unknown))}; its "
            f"dimensions are: {names}."
        )


def fix_shapes(
    model: onnx.ModelProto, config: Configuration, steps: list[str], notes: list[str]
) -> onnx.ModelProto:
    """Fix the batch (if fixed_shapes) and every other named dim to the configured values.

    Appends what it did to steps and what it ignored to notes; returns the re-inferred model.
    """
    ort_tools.without_torch()
    from onnxruntime.tools.onnx_model_utils import (
        fix_output_shapes,
        make_dim_param_fixed,
        make_input_shape_fixed,
    )

    dims = dict(config.symbolic_dims)
    batch_names = batch_dim_names(model)
    unknown = sorted(set(dims) - all_dim_params(model))
    if unknown:
        notes.append(
            f"symbolic dimension(s) {', '.join(unknown)} are not in this model and were ignored"
        )
    specs = specs_of_model(model)
    if config.fixed_shapes:
        for spec in specs:
            shape = concrete_shape(spec["shape"], config.batch_size, dims, spec["name"])
            try:
                make_input_shape_fixed(model.graph, spec["name"], list(shape))
            except ValueError as exc:
                raise UserError(
                    f"Input {spec['name']!r} cannot be fixed to shape {list(shape)}: {exc}."
                ) from exc
        steps.append(f"fixed batch to {config.batch_size}")
    else:
        for spec in specs:  # a missing non-batch dim fails here, with the input's name
            concrete_shape(spec["shape"], 1, dims, spec["name"])
    for name, value in sorted(dims.items()):
        if config.fixed_shapes or name not in batch_names:
            make_dim_param_fixed(model.graph, name, value)
    fixed_names = [n for n in sorted(dims) if n not in unknown and n not in batch_names]
    if fixed_names:
        steps.append("fixed " + ", ".join(f"{n}={dims[n]}" for n in fixed_names))
    if not config.fixed_shapes:
        steps.append("kept the batch dimension dynamic")
    del model.graph.value_info[:]  # stale intermediate shapes would contradict the new ones
    model = onnx.shape_inference.infer_shapes(model)
    if config.fixed_shapes:
        fix_output_shapes(model)
    return model


def shapes_complete(model: onnx.ModelProto) -> bool:
    """Whether ONNX's own shape inference gives every node output a tensor shape whose every
    dimension is a number or a name the model gave (not an `unk__` name inference made up for a
    dimension it could not work out), in a graph without subgraphs."""
    if any(a.type in (a.GRAPH, a.GRAPHS) for n in model.graph.node for a in n.attribute):
        return False
    try:
        graph = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # inference failing only means the symbolic pass runs
        return False
    typed = {v.name: v.type for v in (*graph.value_info, *graph.output)}
    for name in (out for node in graph.node for out in node.output if out):
        kind = typed.get(name)
        if kind is None or not kind.HasField("tensor_type"):
            return False
        shape = kind.tensor_type.shape if kind.tensor_type.HasField("shape") else None
        if shape is None or not all(map(_dim_known, shape.dim)):
            return False
    return True


def _dim_known(dim: onnx.TensorShapeProto.Dimension) -> bool:
    if dim.HasField("dim_value"):
        return True
    return dim.HasField("dim_param") and not dim.dim_param.startswith("unk__")
