"""Building the matrix: every node against every registered column, cached per model.

Sources, best first, and each cell names the one it used:
1. the installed ONNX Runtime's kernel registry (op, domain, version range, element types);
2. the versioned support lists in backend/compat/data for backends not installed here;
3. real placement from a session on each available provider, shown beside the prediction.

`python -m backend.compat.build MODEL [FORMAT]` builds one matrix and prints it as JSON; the
dashboard and the worker run it that way (build_matrix_in_child), because onnx's C++ function
builders can crash on odd models.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

from backend.compat import datafiles
from backend.compat.cells import MATRIX_VERSION, UNSUPPORTED, CompatCell, CompatMatrix
from backend.compat.columns import COLUMNS, ModelContext
from backend.compat.facts import NodeFacts, load_model, node_protos, read_nodes, value_types
from backend.compat.placement import Placement, read_placement
from backend.compat.registry import KernelRegistry, load_registry

ONNX_DOMAINS = {"", "ai.onnx.ml", "ai.onnx.preview.training"}
KNOWN_CONTRIB_DOMAINS = {"com.microsoft", "com.microsoft.nchwc", "org.openvinotoolkit"}


def custom_domain_cell(node: NodeFacts, registry: KernelRegistry) -> CompatCell | None:
    """A node of a domain no backend knows gets the same cell in every column, else None."""
    if node.domain in ONNX_DOMAINS | KNOWN_CONTRIB_DOMAINS or node.domain in registry.domains:
        return None
    return CompatCell(
        UNSUPPORTED,
        f"custom domain '{node.domain}': no backend has a kernel; register a custom-op library",
        "domain",
        f"register a custom-op library for '{node.domain}'",
    )


def runtime_label(registry: KernelRegistry | None = None) -> str:
    try:
        onnx_version = importlib.metadata.version("onnx")
    except importlib.metadata.PackageNotFoundError:
        onnx_version = "?"
    ort = registry.runtime if registry else "onnxruntime ?"
    return f"{ort}; onnx {onnx_version}"


def fingerprint(registry: KernelRegistry, with_placement: bool) -> str:
    """Runtime versions + data-file versions: a change in either expires cached matrices
    (OpenVINO's version too: its column is answered by the installed OpenVINO)."""
    runtime = runtime_label(registry)
    try:
        openvino = importlib.metadata.version("openvino")
    except importlib.metadata.PackageNotFoundError:
        openvino = "none"
    return (
        f"{MATRIX_VERSION}|{runtime}|openvino {openvino}|{datafiles.fingerprint()}|"
        f"placement={int(with_placement)}"
    )


def model_context(
    model_path: Path, model_format: str = "onnx"
) -> tuple[list[NodeFacts], ModelContext]:
    """The model's nodes and what the columns need to judge them."""
    model = load_model(Path(model_path))
    context = ModelContext(
        model_format=model_format,
        registry=load_registry(),
        protos=node_protos(model),
        types=value_types(model),
        model_path=Path(model_path),
    )
    return read_nodes(model), context


def build_matrix(
    model_path: Path, model_format: str = "onnx", with_placement: bool = True
) -> CompatMatrix:
    """Every node of the model against every column; placement from real sessions if asked."""
    nodes, context = model_context(model_path, model_format)
    columns = []
    notes: dict[str, str] = {}
    for name, column in COLUMNS.items():
        availability = column.availability(context)
        if availability.available:
            columns.append(column)
        else:
            notes[name] = availability.reason
    cells: dict[str, list[CompatCell]] = {c.name: [] for c in columns}
    for node in nodes:
        custom = custom_domain_cell(node, context.registry)
        for column in columns:
            cells[column.name].append(custom or context.cell(column, node))
    placements: dict[str, Placement] = {}
    if with_placement:
        placements = real_placements(Path(model_path))
    for column in columns:
        if column.name in placements:
            placement = placements[column.name]
            cells[column.name] = column.refine(nodes, cells[column.name], placement, context)
    sources = [s for c in columns if (s := c.source(context)) is not None]
    return CompatMatrix(
        model_format=model_format,
        nodes=nodes,
        backends=[c.name for c in columns],
        cells=cells,
        placements=placements,
        runtime=runtime_label(context.registry),
        sources=sources,
        fingerprint=fingerprint(context.registry, with_placement),
        notes=notes,
    )


def real_placements(model_path: Path) -> dict[str, Placement]:
    """A real session per column with an ORT provider available here; the others are skipped."""
    from backend.runtimes import get_runtime

    available = {s.name for s in get_runtime("onnxruntime").providers() if s.available}
    return {
        name: read_placement(model_path, column.placement_provider)
        for name, column in COLUMNS.items()
        if column.placement_provider in available
    }


def matrix_for_model(model_id: int, refresh: bool = False) -> CompatMatrix:
    """The matrix of a library model, cached per model sha256 and runtime/data-file versions."""
    from backend.models import library
    from backend.models.genai import is_generative_format
    from storage.repo import caches as compat_cache

    model = library.get_model(model_id)
    generative = is_generative_format(model.format)
    path = _graph_file(model_id) if generative else library.onnx_path(model_id)
    key = fingerprint(load_registry(), with_placement=True)
    if not refresh:
        cached = compat_cache.get_compat(model.sha256, key)
        if cached is not None and cached.get("version") == MATRIX_VERSION:
            return CompatMatrix.from_dict(cached)
    # a generation model's decoder is placed as the plain ONNX graph it is
    matrix = build_matrix_in_child(path, "onnx" if generative else model.format)
    compat_cache.put_compat(model.sha256, key, matrix.to_dict())
    return matrix


def _graph_file(model_id: int) -> Path:
    """A generation model's decoder graph, in its GenAI folder with its external data beside
    it, so the placement sessions can open it."""
    from backend.generate.library import genai_folder
    from backend.generate.weightonly import decoder_name

    folder = genai_folder(model_id)
    return folder / decoder_name(folder)


def build_matrix_in_child(
    model_path: Path, model_format: str = "onnx", timeout: float = 900.0
) -> CompatMatrix:
    """build_matrix in a child process: onnx's C++ function builders can crash on odd models,
    and that must not take the dashboard or the worker down."""
    from backend.launch.children import run_module

    stdout = run_module(
        "backend.compat.build",
        str(model_path),
        model_format,
        timeout_s=timeout,
        what="building the compatibility matrix",
    )
    return CompatMatrix.from_dict(json.loads(stdout))


if __name__ == "__main__":
    built = build_matrix(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "onnx")
    sys.stdout.write(json.dumps(built.to_dict()))
