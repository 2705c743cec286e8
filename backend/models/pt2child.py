"""The child of pt2convert: load an ExportedProgram, export it to ONNX, check it against itself.

Runs only under bubblewrap (pt2convert starts it) after pt2check passed the archive. The
program's guard code (Python source that ExportedProgram.module() would exec) is dropped right
after loading; the input ranges it guarded are the program's range constraints, used here.
torch.export.save keeps no Dim names, so each dynamic dimension is named in the ONNX after the
input and axis where it first appears (x_dim0), with its range recorded beside it.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from backend.launch.converter import attempt, child_main, versions

SEED = 0
SYMBOL = re.compile(r"\b[a-z]{1,4}\d+\b")


def _user_inputs(program: Any) -> list[tuple[str, Any]]:
    """(name, fake tensor) of each user input, in the program's order."""
    names = list(program.graph_signature.user_inputs)
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    found = []
    for name in names:
        value = nodes[name].meta.get("val")
        if not hasattr(value, "shape"):
            raise ValueError(f"input {name!r} is a {type(value).__name__}, not a tensor")
        found.append((name, value))
    return found


def _dims(program: Any, inputs: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Every dynamic dimension: its symbol, ONNX name, range and first (input, axis)."""
    ranges = {str(k): v for k, v in program.range_constraints.items()}
    dims: dict[str, dict[str, Any]] = {}
    for name, value in inputs:
        for axis, size in enumerate(value.shape):
            symbol = str(size)
            if isinstance(size, int) or not SYMBOL.fullmatch(symbol) or symbol in dims:
                continue
            bounds = ranges.get(symbol)
            low = int(bounds.lower) if bounds is not None else 1
            high = _finite(bounds.upper) if bounds is not None else None
            dims[symbol] = {
                "symbol": symbol,
                "name": f"{name}_dim{axis}",
                "min": low,
                "max": high,
                "input": name,
                "axis": axis,
            }
    return list(dims.values())


def _finite(value: Any) -> int | None:
    """An int, or None for the unbounded (torch's int_oo)."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _sizes(dims: list[dict[str, Any]], hints: dict[str, int]) -> list[dict[str, int]]:
    """Two sets of values for the dynamic dims: the example's, then each one step away."""
    base, moved = {}, {}
    for dim in dims:
        low, high = dim["min"], dim["max"] if dim["max"] is not None else 1 << 30
        value = min(max(hints.get(dim["symbol"], max(low, 2)), low), high)
        base[dim["symbol"]] = value
        moved[dim["symbol"]] = value + 1 if value + 1 <= high else max(value - 1, low)
    return [base, moved] if dims and moved != base else [base]


def _hints(program: Any, inputs: list[tuple[str, Any]], dims: list[dict[str, Any]]) -> dict:
    """Each dim's value in the program's example inputs, where it saved them."""
    example = getattr(program, "example_inputs", None)
    try:
        args = list(example[0]) if example else []
    except (TypeError, IndexError):
        args = []
    hints = {}
    for dim in dims:
        index = [n for n, _ in inputs].index(dim["input"])
        if index < len(args) and hasattr(args[index], "shape"):
            hints[dim["symbol"]] = int(args[index].shape[dim["axis"]])
    return hints


def _sample(inputs: list[tuple[str, Any]], values: dict[str, int], seed: int) -> list[Any]:
    """Seeded tensors of each input's dtype with the dims set to `values`."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for _, fake in inputs:
        shape = []
        for size in fake.shape:
            if isinstance(size, int):
                shape.append(size)
            else:  # a symbol or an expression of them (2*s77): the program's own sympy
                expr = size.node.expr
                given = {s: values[str(s)] for s in expr.free_symbols if str(s) in values}
                shape.append(int(expr.subs(given)))
        if fake.dtype.is_floating_point:
            tensors.append(torch.randn(shape, generator=generator).to(fake.dtype))
        elif fake.dtype == torch.bool:
            tensors.append(torch.randint(0, 2, shape, generator=generator).bool())
        else:
            tensors.append(torch.randint(0, 2, shape, generator=generator).to(fake.dtype))
    return tensors


def _rename(onnx_path: Path, dims: list[dict[str, Any]]) -> None:
    """Name the ONNX's symbolic dims after the dims table (s77 -> x_dim0), in every shape."""
    import onnx

    names = {d["symbol"]: d["name"] for d in dims}
    model = onnx.load(str(onnx_path))
    graph = model.graph
    for value in [*graph.input, *graph.output, *graph.value_info]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.dim_param = SYMBOL.sub(lambda m: names.get(m[0], m[0]), dim.dim_param)
    onnx.save(model, str(onnx_path))


def _compare(program: Any, onnx_path: Path, inputs: list[tuple[str, Any]], dims: list) -> dict:
    """ONNX Runtime against the program on seeded inputs at each set of dim values."""
    import torch
    from torch.utils import _pytree

    from backend.runtimes import get_runtime
    from backend.runtimes.base import SessionOptions

    module = program.module()
    runs = []
    with get_runtime("onnxruntime").open(onnx_path, SessionOptions.plain()) as runner:
        feed_names = [spec["name"] for spec in runner.input_specs()]
        for index, values in enumerate(_sizes(dims, _hints(program, inputs, dims))):
            tensors = _sample(inputs, values, SEED + index)
            with torch.no_grad():
                expected = [t.detach().numpy() for t in _pytree.tree_leaves(module(*tensors))]
            got = runner.infer(dict(zip(feed_names, [t.numpy() for t in tensors], strict=True)))
            runs.append(_agreement(inputs, tensors, expected, got))
    return {
        "seed": SEED,
        "runs": runs,
        "max_abs_diff": max(r["max_abs_diff"] for r in runs),
        "cosine": min(r["cosine"] for r in runs),
    }


def _agreement(inputs: list, tensors: list, expected: list, got: list) -> dict:
    """One run's shapes, worst absolute difference and lowest cosine over the outputs."""
    if len(got) != len(expected):
        raise AssertionError(f"{len(got)} ONNX outputs against {len(expected)} in torch")
    worst, cosine = 0.0, 1.0
    for want, have in zip(expected, got, strict=True):
        if want.shape != have.shape:
            raise AssertionError(f"output shape {have.shape} against {want.shape} in torch")
        a, b = want.astype(np.float64).ravel(), have.astype(np.float64).ravel()
        worst = max(worst, float(np.max(np.abs(a - b))) if a.size else 0.0)
        norms = float(np.linalg.norm(a) * np.linalg.norm(b))
        cosine = min(cosine, float(a @ b / norms) if norms > 0 else float(np.allclose(a, b)))
    shapes = {name: list(t.shape) for (name, _), t in zip(inputs, tensors, strict=True)}
    return {"shapes": shapes, "max_abs_diff": worst, "cosine": cosine}


def _child(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    result: dict[str, Any] = {"versions": versions("torch", "onnxscript", "onnx", "onnxruntime")}
    program, failed = attempt("load", lambda: torch.export.load(args.program))
    if failed:
        return {**result, **failed}
    program._guards_code = []  # Python source that .module() would exec: never run
    try:
        inputs = _user_inputs(program)
    except ValueError as exc:
        return {**result, "error": "inputs", "detail": str(exc)}
    dims = _dims(program, inputs)
    result["dims"] = dims
    print(f"optiboard: exporting {len(inputs)} input(s), dynamic dims {dims}", flush=True)

    def export() -> None:
        torch.onnx.export(program, dynamo=True, optimize=True, verbose=False).save(args.output)

    _, failed = attempt("export", export, output=args.output, detail=_reason)
    if failed:
        return {**result, **failed}
    _rename(Path(args.output), dims)
    import onnx

    opsets = onnx.load(args.output, load_external_data=False).opset_import
    result["opset"] = next((o.version for o in opsets if o.domain in ("", "ai.onnx")), 0)
    check, failed = attempt(
        "mismatch", lambda: _compare(program, Path(args.output), inputs, dims), output=args.output
    )
    if failed:
        return {**result, **failed}
    result["check"] = check
    print(f"optiboard: check {json.dumps(result['check'])}", flush=True)
    return result


def _reason(exc: BaseException) -> str:
    """The exporter's own reason: the innermost error's message, whose first line names the op."""
    inner = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    text = str(inner) or str(exc)
    return f"{type(inner).__name__}: {text}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the child: convert and check, then write a JSON result for the parent."""
    return child_main("python -m backend.models.pt2child", _options, _child, argv)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--program", required=True)
    parser.add_argument("--output", required=True)


if __name__ == "__main__":
    raise SystemExit(main())
