"""A generation benchmark measured in the limited, sandboxed child, as sweeps measure.

The child opens the (possibly uploaded) model folders and parses the text, so it runs under
bubblewrap with those paths read-only and returns JSON only; without a working sandbox the run is
refused with the reason. The device's peak bandwidth is found here, in the parent (the CPU's copy
bandwidth is cached per host in the data folder, which the child cannot write).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import settings
from backend.counts import counted
from backend.errors import UserError
from backend.generate.benchmark import (
    NOT_MEASURED,
    GenerationSpec,
    measure_generation,
    reference_failed,
)
from backend.generate.results import GenerationReport
from backend.generate.roofline import device_peak
from backend.hfcheck import is_hf_only
from backend.launch import sandbox
from backend.launch.forks import Forks
from backend.launch.limits import ChildLimits
from backend.runtimeenvs import DEFAULT, RuntimeEnv, ready_env

TARGET = "backend.generate.benchmark:measure_generation"
OWN_REFERENCE = (
    "agreement: greedy tokens against the same Hugging Face folder as transformers loads it, in "
    "fp32, uncompiled, without the torch runtime's layer changes (no GenAI FP32 folder given)"
)
REFERENCE_TARGET = "backend.generate.benchmark:reference_generation"
PRELOAD = ("backend.generate.benchmark",)  # numpy and the benchmark's code; no runtime


class GenerationCancelled(Exception):
    """should_cancel said stop: the child was killed and nothing was measured to the end."""


# what each kind of folder `check_folder` takes is, said where one is missing or wrong
FOLDER_KINDS = {
    "model": "an ONNX Runtime GenAI model folder (model.onnx, genai_config.json, tokenizer "
    "files), or a Hugging Face folder (config.json, model.safetensors) with --runtimes torch",
    "reference": "an ONNX Runtime GenAI FP32 folder or a Hugging Face folder",
    "OpenVINO": "an OpenVINO GenAI folder (openvino_model.xml; or export one with "
    "--openvino-from HF_FOLDER)",
    "Hugging Face": "a Hugging Face folder (config.json, model.safetensors)",
}


def check_folder(folder: Path, what: str = "model") -> Path:
    """A GenAI model folder (or, for openvino-genai, an OpenVINO IR folder; for torch and a
    reference, a Hugging Face folder), or one sentence saying what is wrong."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"The {what} folder {folder} does not exist; give {FOLDER_KINDS[what]}.")
    if what == "OpenVINO" and not (folder / "openvino_model.xml").is_file():
        raise UserError(f"{folder} has no openvino_model.xml; give {FOLDER_KINDS[what]}.")
    if what == "Hugging Face":
        from backend.hfcheck import check_hf_folder

        check_hf_folder(folder, folder.name)  # safetensors only: pickled weights refused
        return folder.resolve()
    if what != "OpenVINO" and not (folder / "genai_config.json").is_file():
        raise UserError(f"{folder} has no genai_config.json; give {FOLDER_KINDS[what]}.")
    return folder.resolve()


def check_text_size(path: Path) -> Path:
    """The size cap applied before any child starts (the child checks it again as it reads)."""
    path = Path(path)
    if not path.is_file():
        being = "is a folder" if path.is_dir() else "does not exist"
        raise UserError(f"The perplexity text {path} {being}; give a text file.")
    cap = settings.PERPLEXITY_TEXT_MB.get()
    size = path.stat().st_size
    if size > cap * 2**20:
        raise UserError(
            f"The perplexity text {path.name} is {size / 2**20:.1f} MB, over the {cap:g} MB cap "
            "(OPTIBOARD_PERPLEXITY_TEXT_MB); give a shorter text."
        )
    return path.resolve()


def _model_folders(
    folder: Path, spec: GenerationSpec, torch_folder: Path | None
) -> tuple[Path, Path | None]:
    """The checked model folder and torch's Hugging Face folder: a Hugging Face folder given as
    the model is torch's, when torch is the only runtime."""
    if is_hf_only(folder):
        if set(spec.runtimes) != {"torch"}:
            raise UserError(
                f"{Path(folder).name} is a Hugging Face folder, which only the torch runtime "
                "opens; give --runtimes torch, or an ONNX Runtime GenAI folder as the model with "
                "--torch-from HF_FOLDER."
            )
        torch_folder = torch_folder or folder
    torch_hf = check_folder(torch_folder, "Hugging Face") if torch_folder else None
    return (torch_hf if is_hf_only(folder) and torch_hf else check_folder(folder)), torch_hf


def run_generation(
    folder: Path,
    spec: GenerationSpec,
    text_path: Path | None = None,
    reference: Path | None = None,
    *,
    openvino_folder: Path | None = None,
    torch_folder: Path | None = None,
    in_process: bool = False,
    should_cancel: Callable[[], bool] | None = None,
    runtime_env: str = DEFAULT,
    progress: Callable[[str], None] | None = None,
) -> GenerationReport:
    """The benchmark of one model folder: every runtime x point, perplexity on the text, greedy
    agreement with the reference folder's tokens; openvino-genai runs openvino_folder (the same
    model as OpenVINO IR) when given, torch runs torch_folder (its Hugging Face folder), and a
    Hugging Face folder given as the model is torch's when torch is the only runtime, and its
    own reference when none is given (fp32, uncompiled, as transformers loads it).
    in_process=True runs here (tests, bench). runtime_env: the children run under that
    environment's interpreter (its onnxruntime under GenAI). progress hears a line as each
    child starts (a runtime's points can take minutes, with nothing else to show)."""
    env = ready_env(runtime_env)
    if in_process and env.name != DEFAULT:
        raise UserError(
            f"--in-process measures in this interpreter, not under {env.name!r}; drop one of them."
        )
    folder, torch_hf = _model_folders(folder, spec, torch_folder)
    if reference:  # a GenAI FP32 folder, or a Hugging Face folder run in fp32 by transformers
        kind = "Hugging Face" if is_hf_only(reference) else "reference"
        reference = check_folder(reference, kind)
    own = reference is None and is_hf_only(folder)  # agreement with the model as loaded, fp32
    reference = folder if own else reference
    openvino = check_folder(openvino_folder, "OpenVINO") if openvino_folder else None
    text_path = check_text_size(text_path) if text_path else None
    request = {
        "folder": str(folder),
        "spec": spec.to_dict(),
        "peak": device_peak(spec.device).to_dict(),
        "text_path": str(text_path) if text_path else None,
        "reference": str(reference) if reference else None,
        "folders": {
            **({"openvino-genai": str(openvino)} if openvino else {}),
            **({"torch": str(torch_hf)} if torch_hf else {}),
        },
    }
    if in_process:
        report = GenerationReport.from_dict(measure_generation(request))
        report.notes.append("measured in-process (not in the sandboxed child)")
    else:
        seen = [folder, reference, openvino, torch_hf, text_path, *env.read_only()]
        report = _sandboxed(request, spec, seen, should_cancel, env, progress)
    if not any(note.startswith(NOT_MEASURED) for note in report.notes):
        report.notes += _reference_notes(reference, own)  # not beside "was not measured"
    if any(r.runtime == "ort-genai" and r.status == "ok" for r in report.results):
        _state_genai_precision(report, folder, spec.device)
    return report


def _reference_notes(reference: Path | None, own: bool) -> list[str]:
    """What greedy agreement was measured against, where that is a Hugging Face folder."""
    if own:
        return [OWN_REFERENCE]
    if reference is None or not is_hf_only(reference):
        return []
    return [
        f"agreement: greedy tokens against the Hugging Face folder {reference.name} as "
        "transformers loads it, in fp32, uncompiled, without the torch runtime's layer changes"
    ]


def _sandboxed(
    request: dict[str, Any],
    spec: GenerationSpec,
    seen: list[Path | None],
    should_cancel: Callable[[], bool] | None,
    env: RuntimeEnv,
    progress: Callable[[str], None] | None = None,
) -> GenerationReport:
    """The benchmark in its sandboxed children, which see `seen` read-only, the GPU for a GPU
    spec, and RAPL's counters (they measure energy)."""
    refused = sandbox.needed_for("A generation benchmark runs the model")
    if refused:
        raise UserError(f"{refused}.")
    binds = sandbox.Binds.of(read_only=seen, gpu=spec.device != "cpu", energy=True)
    return in_children(request, spec, binds, should_cancel, env.python, progress)


def _state_genai_precision(report: GenerationReport, folder: Path, device: str) -> None:
    """ONNX Runtime GenAI reports no precision of its own: its points state what the decoder
    graph declares (facts.decoder_types, read here, past 16 MiB in a limited child, never in
    the measuring child, whose peak RSS is a reported figure)."""
    from backend.generate.facts import decoder_types
    from backend.generate.weightonly import decoder_name

    try:
        stated = decoder_types(folder / decoder_name(folder)).facts(device)
    except UserError as exc:
        report.notes.append(f"ort-genai's precision was not read: {exc}")
        return
    for result in report.results:
        if result.runtime == "ort-genai":
            result.facts.update(stated)


def in_children(
    request: dict[str, Any],
    spec: GenerationSpec,
    binds: sandbox.Binds,
    should_cancel: Callable[[], bool] | None,
    python: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> GenerationReport:
    """The reference's tokens in one sandboxed child, then a child per runtime, so each
    runtime's peak RSS holds that runtime only (nor the reference's session). On the CPU each
    is a fork of one server that imported the benchmark's code once (backend/launch/forks.py),
    as a sweep's configurations are; each fork imports its runtime itself."""
    with Forks(PRELOAD) as forks:
        return _in_children(forks, request, spec, binds, should_cancel, python, progress)


def _in_children(
    forks: Forks,
    request: dict[str, Any],
    spec: GenerationSpec,
    binds: sandbox.Binds,
    should_cancel: Callable[[], bool] | None,
    python: str | None,
    progress: Callable[[str], None] | None,
) -> GenerationReport:
    say = progress or (lambda line: None)
    points = len(spec.points())
    timeout_s = settings.CONFIG_TIMEOUT_S.get() * points

    def child(target: str, request: dict[str, Any]) -> tuple[Any, list[str]]:
        outcome = forks.call(
            target,
            request,
            timeout_s=timeout_s,
            what="The generation benchmark",
            should_cancel=should_cancel,
            sandboxed=True,
            binds=binds,
            limits=ChildLimits.from_settings(gpu=binds.gpu),
            python=python,
        )
        if outcome.cancelled:
            raise GenerationCancelled("The generation benchmark was cancelled.")
        return outcome.value_or_raise("The generation benchmark"), outcome.notes

    notes: list[str] = []
    if request.get("reference"):
        reference = Path(request["reference"]).name
        say(f"the reference's greedy tokens ({reference}) in a sandboxed child")
        try:
            tokens, notes = child(REFERENCE_TARGET, request)
        except UserError as exc:  # e.g. no CUDA build of ort-genai here: the points still run
            tokens, notes = None, [reference_failed(exc)]
        request = {**request, "reference": None, "reference_tokens": tokens}
    parts = []
    for name in spec.runtimes:
        say(f"{name}: {counted(points, 'point')} in a sandboxed child (at most {timeout_s:.0f} s)")
        value, more = child(TARGET, {**request, "spec": {**request["spec"], "runtimes": [name]}})
        parts.append(GenerationReport.from_dict(value))
        notes += [n for n in more if n not in notes]
    report = parts[0]
    for part in parts[1:]:
        report.results.extend(part.results)
        report.perplexity.update(part.perplexity)
    report.spec = spec.to_dict()
    report.notes.extend([*notes, "measured in the sandboxed, limited child (one per runtime)"])
    return report


def openvino_from(hf_folder: Path) -> Path:
    """The OpenVINO GenAI folder exported from an HF folder (ovexport, in the sandboxed child),
    cached in the data folder by the folder's path and its weights' size and time."""
    import hashlib

    from backend.generate.ovexport import MODEL_XML, export_openvino

    hf_folder = Path(hf_folder).resolve()
    weights = hf_folder / "model.safetensors"
    if not weights.is_file():
        raise UserError(f"{hf_folder} has no model.safetensors; give a Hugging Face folder.")
    stat = weights.stat()
    key = hashlib.sha256(f"{hf_folder}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
    target = settings.data_dir() / "cache" / "openvino-genai" / key[:16]
    if not (target / MODEL_XML).is_file():
        shutil.rmtree(target, ignore_errors=True)  # a half-written export of a killed run
        target.parent.mkdir(parents=True, exist_ok=True)
        export_openvino(hf_folder, target)
    return target
