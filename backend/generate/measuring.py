"""A generation benchmark measured in the limited, sandboxed child, as sweeps measure.

The child opens the (possibly uploaded) model folders and parses the text, so it runs under
bubblewrap with those paths read-only and returns JSON only; without a working sandbox the run is
refused with the reason. The device's peak bandwidth is found here, in the parent (the CPU's copy
bandwidth is cached per host in the data folder, which the child cannot write).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import settings
from backend.errors import UserError
from backend.generate.benchmark import GenerationReport, GenerationSpec, measure_generation
from backend.generate.roofline import device_peak
from backend.launch import sandbox
from backend.launch.children import call_in_child
from backend.launch.limits import ChildLimits

TARGET = "backend.generate.benchmark:measure_generation"


def check_folder(folder: Path, what: str = "model") -> Path:
    """A GenAI model folder (or, for openvino-genai, an OpenVINO IR folder), or one sentence
    saying what is wrong."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"The {what} folder {folder} does not exist; give a GenAI model folder.")
    if what == "OpenVINO" and not (folder / "openvino_model.xml").is_file():
        raise UserError(
            f"{folder} has no openvino_model.xml; give an OpenVINO GenAI folder (or export one "
            "with --openvino-from HF_FOLDER)."
        )
    if what != "OpenVINO" and not (folder / "genai_config.json").is_file():
        raise UserError(
            f"{folder} has no genai_config.json; give an ONNX Runtime GenAI model folder "
            "(model.onnx, genai_config.json, tokenizer files)."
        )
    return folder.resolve()


def check_text_size(path: Path) -> Path:
    """The size cap applied before any child starts (the child checks it again as it reads)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"The perplexity text {path} does not exist; give a text file.")
    cap = settings.PERPLEXITY_TEXT_MB.get()
    size = path.stat().st_size
    if size > cap * 2**20:
        raise UserError(
            f"The perplexity text {path.name} is {size / 2**20:.1f} MB, over the {cap:g} MB cap "
            "(OPTIBOARD_PERPLEXITY_TEXT_MB); give a shorter text."
        )
    return path.resolve()


def run_generation(
    folder: Path,
    spec: GenerationSpec,
    text_path: Path | None = None,
    reference: Path | None = None,
    *,
    openvino_folder: Path | None = None,
    in_process: bool = False,
    should_cancel: Callable[[], bool] | None = None,
) -> GenerationReport:
    """The benchmark of one model folder: every runtime x point, perplexity on the text, greedy
    agreement with the reference folder's tokens; openvino-genai runs openvino_folder (the same
    model as OpenVINO IR) when given. in_process=True runs here (tests, bench)."""
    folder = check_folder(folder)
    reference = check_folder(reference, "reference") if reference else None
    openvino = check_folder(openvino_folder, "OpenVINO") if openvino_folder else None
    text_path = check_text_size(text_path) if text_path else None
    request = {
        "folder": str(folder),
        "spec": spec.to_dict(),
        "peak": device_peak(spec.device).to_dict(),
        "text_path": str(text_path) if text_path else None,
        "reference": str(reference) if reference else None,
        "folders": {"openvino-genai": str(openvino)} if openvino else {},
    }
    if in_process:
        report = GenerationReport.from_dict(measure_generation(request))
        report.notes.append("measured in-process (not in the sandboxed child)")
        return report
    state = sandbox.available()
    if not state.ok:
        raise UserError(
            f"A generation benchmark runs the model only inside the sandbox, and {state.reason}."
        )
    gpu = spec.device != "cpu"
    points = len(spec.points()) * len(spec.runtimes) + (1 if reference else 0)
    outcome = call_in_child(
        TARGET,
        request,
        timeout_s=settings.CONFIG_TIMEOUT_S.get() * max(points, 1),
        what="The generation benchmark",
        should_cancel=should_cancel,
        sandboxed=True,
        binds=sandbox.Binds.of(read_only=[folder, reference, openvino, text_path], gpu=gpu),
        limits=ChildLimits.from_settings(gpu=gpu),
    )
    report = GenerationReport.from_dict(outcome.value_or_raise("The generation benchmark"))
    report.notes.extend(outcome.notes)
    report.notes.append("measured in the sandboxed, limited child")
    return report


def openvino_from(hf_folder: Path) -> Path:
    """The OpenVINO IR folder exported from an HF folder (sandboxed child), cached in the data
    folder by the folder's path and its weights' size and time."""
    import hashlib

    from backend.generate.openvino_export import export_openvino_in_child

    hf_folder = Path(hf_folder).resolve()
    weights = hf_folder / "model.safetensors"
    if not weights.is_file():
        raise UserError(f"{hf_folder} has no model.safetensors; give a Hugging Face folder.")
    stat = weights.stat()
    key = hashlib.sha256(f"{hf_folder}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
    target = settings.data_dir() / "cache" / "openvino-genai" / key[:16]
    if not (target / "openvino_model.xml").is_file():
        export_openvino_in_child(hf_folder, target)
    return target
