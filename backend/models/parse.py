"""Parsing of untrusted uploads, run only in a limited (and, where available, sandboxed) child.

onnx's protobuf parser, checker and shape inference, and numpy's .npz reader, are fed files that
anyone who reaches the dashboard can upload; a hostile file can make them allocate without bound
or crash. So the web process never parses an upload itself: the parent-side functions here start
a child through backend.launch.children.run_parse, and the child-side functions (prefixed
`child_`) take and return JSON only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.errors import UserError
from backend.launch.children import run_parse

MB = 1 << 20


def check_onnx(path: Path, shown: str) -> dict[str, Any]:
    """Metadata of a single uploaded .onnx that must be self-contained; UserError says why not."""
    path = Path(path).resolve()
    return run_parse(
        "backend.models.parse:child_check_onnx",
        str(path),
        shown,
        what=f"Checking {shown!r}",
        read_only=[path],
    )


def inspect(path: Path, shown: str) -> dict[str, Any]:
    """inspect_model's metadata of a model file (for example one just converted), in a child."""
    path = Path(path).resolve()
    return run_parse(
        "backend.models.parse:child_inspect",
        str(path),
        shown,
        what=f"Checking {shown!r}",
        read_only=[path],
    )


def internalise(model_path: Path, folder: Path, shown: str, output: Path) -> dict[str, Any]:
    """Check an .onnx and its external data files, then write them as one file to `output`."""
    model_path, folder = Path(model_path).resolve(), Path(folder).resolve()
    return run_parse(
        "backend.models.parse:child_internalise",
        str(model_path),
        str(folder),
        shown,
        what=f"Checking {shown!r}",
        read_only=[folder],
        outputs={"internalised.onnx": Path(output)},
    )


def inspect_external(model_path: Path, folder: Path, shown: str) -> dict[str, Any]:
    """Metadata of an .onnx whose external data stays beside it (a generative model's folder):
    every reference checked to be a file inside `folder`; the weights are never read."""
    model_path, folder = Path(model_path).resolve(), Path(folder).resolve()
    return run_parse(
        "backend.models.parse:child_inspect_external",
        str(model_path),
        str(folder),
        shown,
        what=f"Checking {shown!r}",
        read_only=[folder],
    )


# ---- child side -------------------------------------------------------------------------------


def child_check_onnx(path: str, shown: str) -> dict[str, Any]:
    from backend.models.inspect import (
        check_self_contained,
        external_data_files,
        inspect_model,
        load_proto,
    )

    model = load_proto(Path(path), display_name=shown)
    missing = external_data_files(model)
    if missing:
        raise UserError(
            f"The model {shown!r} keeps its weights in the external data file "
            f"{missing[0]!r}, which a single upload cannot include; upload a .zip holding "
            "the .onnx and its data files."
        )
    check_self_contained(model, shown)
    del model
    return inspect_model(Path(path), display_name=shown).to_dict()


def child_inspect(path: str, shown: str) -> dict[str, Any]:
    """inspect_model of a file about to be stored, which must hold all its own weights."""
    from backend.models.inspect import check_self_contained, inspect_model, load_proto

    check_self_contained(load_proto(Path(path), display_name=shown), shown)
    return inspect_model(Path(path), display_name=shown).to_dict()


def child_inspect_external(model_file: str, folder_text: str, shown: str) -> dict[str, Any]:
    from backend.models.inspect import check_self_contained, inspect_model, load_proto

    model_path, folder = Path(model_file), Path(folder_text)
    model = load_proto(model_path, display_name=shown)
    check_self_contained(model, shown, memory_only=True)
    locations = _checked_locations(model, model_path.parent, folder, shown)
    del model
    metadata = inspect_model(model_path, display_name=shown, lenient=True).to_dict()
    return {"metadata": metadata, "locations": locations}


def _checked_locations(model: Any, base: Path, folder: Path, shown: str) -> list[str]:
    """The external data files, each a file inside `folder`; UserError for any that is not."""
    from backend.models.inspect import external_data_files

    locations = external_data_files(model)
    for location in locations:
        target = (base / location).resolve()
        if not target.is_relative_to(folder.resolve()):
            raise UserError(
                f"The model {shown!r} refers to external data {location!r} outside the zip; "
                "re-save it with its data files next to the .onnx."
            )
        if not target.is_file():
            raise UserError(
                f"The model {shown!r} needs the external data file {location!r}, which is not "
                "in the zip; add it next to the .onnx and zip them again."
            )
    return locations


def child_internalise(model_file: str, folder_text: str, shown: str) -> dict[str, Any]:
    """Every external-data reference checked, then the model saved as one file in the cwd."""
    import onnx

    from backend.models.inspect import (
        PROTOBUF_LIMIT,
        check_self_contained,
        inspect_model,
        load_proto,
    )

    model_path, folder = Path(model_file), Path(folder_text)
    model = load_proto(model_path, display_name=shown)
    check_self_contained(model, shown, memory_only=True)
    base = model_path.parent
    locations = _checked_locations(model, base, folder, shown)
    if _internalised_size(model, base) > PROTOBUF_LIMIT:
        raise UserError(
            f"The model {shown!r} would be over protobuf's 2 GB limit as one ONNX file, so it "
            "cannot be optimized here; upload a smaller model."
        )
    del model
    metadata = inspect_model(model_path, display_name=shown).to_dict()
    try:
        full = onnx.load(str(model_path), load_external_data=True)
    except (OSError, ValueError) as exc:
        raise UserError(
            f"The external data of {shown!r} could not be read ({exc}); re-export the model "
            "and zip the .onnx with all its data files."
        ) from None
    if full.ByteSize() > PROTOBUF_LIMIT:
        raise UserError(
            f"The model {shown!r} is over protobuf's 2 GB limit as one ONNX file, so it cannot "
            "be optimized here; upload a smaller model."
        )
    check_self_contained(full, shown)
    onnx.save(full, "internalised.onnx")  # into the child's scratch folder (its cwd)
    return {"metadata": metadata, "locations": locations}


def _internalised_size(model: Any, base: Path) -> int:
    """Bytes the model takes with its external tensors inlined (a close upper bound)."""
    from backend.models.inspect import external_tensors

    total = model.ByteSize()
    for graph_tensor in external_tensors(model):
        entries = {e.key: e.value for e in graph_tensor.external_data}
        if "length" in entries:
            total += int(entries["length"])
        else:
            file = base / entries.get("location", "")
            total += max(file.stat().st_size - int(entries.get("offset", "0")), 0)
    return total
