"""PyTorch ExportedProgram (.pt2) to ONNX with torch.onnx's dynamo exporter, always in a
sandboxed, limited child process, like the SavedModel conversion (tfconvert.py).

The archive was checked from its bytes first (pt2check.py: nothing in it can run code when torch
loads it); the child still runs under bubblewrap with TORCH_FORCE_WEIGHTS_ONLY_LOAD=1, loads the
program, exports it keeping its dynamic dimensions symbolic, and compares ONNX Runtime's outputs
with the program's on seeded sample inputs (pt2child.py). The parent reads back a small JSON
result and the child's full output as the conversion log.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import settings
from backend.errors import ConversionFailed, UserError
from backend.launch import sandbox
from backend.launch.children import child_folder, run_parse
from backend.launch.converter import require_sandbox, run_converter, stopped
from backend.launch.outcomes import ProcessOutcome, last_line
from backend.models.pt2check import EXPORT_HINT

EXPORTER_MODULES = ("torch", "onnxscript")
# every torch.load inside torch.export.load runs weights-only (its sample-inputs fallback too)
CHILD_ENV = (("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1"),)


@dataclass(frozen=True)
class Conversion:
    onnx_path: Path
    opset: int
    log: str
    versions: dict[str, str]
    dims: list[dict[str, Any]]  # each dynamic dimension: its ONNX name, range, where it is
    check: dict[str, Any]  # ONNX Runtime against the program: shapes, max abs diff, cosine


def exporter_missing() -> str:
    """'' when torch and onnxscript are installed here, else which ones are missing."""
    return ", ".join(name for name in EXPORTER_MODULES if not _importable(name))


def _importable(name: str) -> bool:
    """Found without importing it (torch takes seconds to import)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken or blocked installation
        return False


def check_archive_in_child(program: Path, filename: str) -> None:
    """pt2check.check_archive in a limited child (sandboxed, else confined): the archive's
    JSON graph (up to 256 MiB), configs and pickle opcodes are an upload's bytes, and this may be
    the web process; a refusal keeps its sentence."""
    run_parse(
        "backend.models.pt2check:child_check_archive",
        str(program),
        filename,
        what=f"Checking the .pt2 file {filename!r}",
        read_only=[program],
    )


def require_exporter(filename: str) -> None:
    missing = exporter_missing()
    if missing:
        raise UserError(
            f"The file {filename!r} is a PyTorch ExportedProgram, which is converted with "
            f"torch.onnx's exporter; that needs {missing} (not installed here): install "
            "requirements-genai.txt, or export the model to ONNX yourself and upload the .onnx."
        )


def convert_exported_program(
    program: Path, output_path: Path, filename: str, timeout_s: float | None = None
) -> Conversion:
    """Check the archive, then export it to `output_path` and check the result in a child."""
    program = Path(program).resolve()
    check_archive_in_child(program, filename)
    require_exporter(filename)
    require_sandbox("PyTorch .pt2 uploads", "loading one is only ever done inside that sandbox")
    timeout = settings.CONVERT_TIMEOUT_S.get() if timeout_s is None else timeout_s
    with child_folder() as folder:
        produced = folder.scratch / "model.onnx"
        args = ["--program", str(program), "--output", str(produced)]
        binds = sandbox.Binds.of(read_only=[program], env=CHILD_ENV)
        done, result = run_converter("backend.models.pt2child", args, folder, timeout, binds)
        _raise_on_failure(done, result, timeout)
        if not produced.is_file():
            raise ConversionFailed(
                "The PyTorch export finished without writing the ONNX file; see the conversion "
                "log.",
                done.stdout,
            )
        shutil.move(produced, output_path)
    return Conversion(
        onnx_path=Path(output_path),
        opset=int(result.get("opset", 0)),
        log=done.stdout,
        versions=result.get("versions", {}),
        dims=result.get("dims", []),
        check=result.get("check", {}),
    )


def _one_line(text: str) -> str:
    """The exporter's reason in one line: its first non-empty line, without the stack."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return " ".join((lines[0] if lines else "").split())[:300]


def _raise_on_failure(done: ProcessOutcome, result: dict[str, Any], timeout: float) -> None:
    log = done.stdout
    limit = stopped(done, "The PyTorch export", timeout)
    if limit is not None:
        raise ConversionFailed(limit, log)
    error, detail = result.get("error"), _one_line(result.get("detail", ""))
    if error == "load":
        raise ConversionFailed(
            f"torch.export.load could not read the program ({detail}); {EXPORT_HINT} with the "
            f"same torch version as here ({result.get('versions', {}).get('torch', '?')}).",
            log,
        )
    if error == "export":
        raise ConversionFailed(
            f"torch.onnx.export could not convert the program: {detail}; see the conversion log "
            "for the operator, or rewrite that part of the model.",
            log,
        )
    if error == "inputs":
        raise ConversionFailed(
            f"The program's inputs cannot be sampled for the check ({detail}); export it with "
            "tensor inputs only.",
            log,
        )
    if error == "mismatch":
        raise ConversionFailed(
            f"The ONNX model does not compute what the program computes ({detail}); see the "
            "conversion log.",
            log,
        )
    if error is not None or done.returncode != 0:
        raise ConversionFailed(
            f"The PyTorch export crashed ({detail or last_line(log) or done.returncode}); see "
            "the conversion log.",
            log,
        )
