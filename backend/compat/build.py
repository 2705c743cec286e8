"""Building the matrix: every node against every registered column, cached per model.

Sources, best first, and each cell names the one it used:
1. the installed ONNX Runtime's kernel registry (op, domain, version range, element types);
2. the versioned support lists in backend/compat/data for backends not installed here;
3. real placement from a session on each available provider, shown beside the prediction.

The dashboard and the worker never open the uploaded model themselves (build_matrix_in_child):
onnx's C++ function builders can crash on odd models, and the OpenVINO column reads and compiles
it, so the matrix is built in a child that is sandboxed wherever bubblewrap works (as an upload's
parsing is), and each real placement in a sandboxed child of its own (compat/placement.py).
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import sys
from pathlib import Path
from typing import Any

from backend.compat import datafiles
from backend.compat.cells import MATRIX_VERSION, UNSUPPORTED, CompatCell, CompatMatrix
from backend.compat.columns import COLUMNS, ModelContext
from backend.compat.facts import NodeFacts, load_model, node_protos, read_nodes, value_types
from backend.compat.placement import Placement, read_placement
from backend.compat.registry import KernelRegistry, load_registry
from backend.compat.registry import from_json as registry_from_json
from backend.compat.registry import to_json as registry_to_json
from backend.errors import UserError
from backend.runtimes import onnxruntime_provider_name

log = logging.getLogger(__name__)
PROBE_FAILED = "not placed: probing ONNX Runtime's providers failed"

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
    model_path: Path, model_format: str = "onnx", registry: KernelRegistry | None = None
) -> tuple[list[NodeFacts], ModelContext]:
    """The model's nodes and what the columns need to judge them."""
    model = load_model(Path(model_path))
    context = ModelContext(
        model_format=model_format,
        registry=registry or load_registry(),
        protos=node_protos(model),
        types=value_types(model),
        model_path=Path(model_path),
    )
    return read_nodes(model), context


def build_matrix(
    model_path: Path,
    model_format: str = "onnx",
    with_placement: bool = True,
    *,
    registry: KernelRegistry | None = None,
    placements: dict[str, Placement] | None = None,
) -> CompatMatrix:
    """Every node of the model against every column; placement from real sessions if asked
    (`placements`: those already read; else read here, each in its sandboxed child)."""
    nodes, context = model_context(model_path, model_format, registry)
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
    if not with_placement:
        placements = {}
    elif placements is None:
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
    """A real session per column with an ORT provider available here; the others are skipped.
    A provider probe that failed says so on the CPU column, whose provider is always there."""
    try:
        available = placement_providers()
    except (UserError, RuntimeError) as exc:  # a fault of ours: its traceback to the log only
        log.warning("the provider probe failed: %s", exc)
        said = str(exc) if isinstance(exc, UserError) else "the service's log has its traceback"
        why = f"{PROBE_FAILED} ({said})"
        native = onnxruntime_provider_name("cpu")
        return {
            n: Placement(native, error=why)
            for n, c in COLUMNS.items()
            if c.placement_provider == "cpu"
        }
    return {
        name: read_placement(model_path, column.placement_provider)
        for name, column in COLUMNS.items()
        if column.placement_provider in available
    }


@functools.cache
def placement_providers() -> frozenset[str]:
    """ONNX Runtime's providers that start here (short names), probed once per process: in a
    child unless ONNX Runtime is loaded already (the worker), since loading it and probing adds
    about 140 MB to the dashboard's process. A probe that fails raises, which the cache does
    not keep: the next matrix probes again."""
    if "onnxruntime" in sys.modules:
        return frozenset(available_providers())
    from backend.launch.children import run_call

    found = run_call(
        "backend.compat.build:available_providers", timeout_s=120, what="The provider probe"
    )
    return frozenset(name for name in found if isinstance(name, str))


def available_providers() -> list[str]:
    from backend.runtimes import get_runtime

    return [s.name for s in get_runtime("onnxruntime").providers() if s.available]


def matrix_for_model(model_id: int, refresh: bool = False) -> CompatMatrix:
    """The matrix of a library model, cached per model sha256 and runtime/data-file versions."""
    from backend.models import library
    from backend.models.genai import is_generative_format
    from storage.repo import caches as compat_cache

    model = library.get_model(model_id)
    generative = is_generative_format(model.format)
    path = _graph_file(model_id) if generative else library.onnx_path(model_id)
    from backend.launch import sandbox

    # placed only where a sandbox works: a matrix cached without one is not reused once it does
    key = fingerprint(load_registry(), with_placement=sandbox.available().ok)
    if not refresh:
        cached = compat_cache.get_compat(model.sha256, key)
        if cached is not None and cached.get("version") == MATRIX_VERSION:
            return CompatMatrix.from_dict(cached)
    # a generation model's decoder is placed as the plain ONNX graph it is
    matrix = build_matrix_in_child(path, "onnx" if generative else model.format)
    errors = [p.error or "" for p in matrix.placements.values()]
    if not any(e.startswith(PROBE_FAILED) for e in errors):  # else the next view probes again
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
    """build_matrix without opening the model in this process: the placements first, each in
    its sandboxed child, then the matrix in a child sandboxed wherever bubblewrap works (else
    confined to the same view by Landlock), given the kernel registry and those placements (it
    sees the model's folder, not the data folder).
    A child that fails on the upload (a crash, a limit, the time) is a UserError in one
    sentence, as an upload's parsing is; a fault of ours in it stays a RuntimeError."""
    from backend.launch import sandbox
    from backend.launch.children import run_call

    path = Path(model_path).resolve()
    registry = load_registry()
    placements = real_placements(path)
    what = "Building the compatibility matrix"
    answer = run_call(
        "backend.compat.build:matrix_in_child",
        str(path),
        model_format,
        registry_to_json(registry),
        {name: placement.to_dict() for name, placement in placements.items()},
        timeout_s=timeout,
        what=what,
        sandboxed=sandbox.available().ok,
        read_only=[path.parent],
        confine=True,  # without bubblewrap: Landlock's view of the same folder
    )
    try:
        return CompatMatrix.from_dict(answer)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(
            f"{what} gave an answer that does not read ({exc}); the model may be hostile or "
            "damaged: check the file and upload it again."
        ) from None


def matrix_in_child(
    model_path: str, model_format: str, registry: dict[str, Any], placements: dict[str, Any]
) -> dict[str, Any]:
    """In the child: build_matrix with the parent's registry and placements, as JSON."""
    given = {name: Placement.from_dict(p) for name, p in placements.items()}
    return build_matrix(
        Path(model_path), model_format, registry=registry_from_json(registry), placements=given
    ).to_dict()
