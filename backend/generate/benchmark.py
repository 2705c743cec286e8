"""Generation benchmark: prompt length x new tokens x concurrent sequences, greedy decoding of
an exact token count, per runtime; time to first token, inter-token latency, tokens/s, memory
(weights, KV cache, peak RSS), the bandwidth roofline, stability as sweeps judge it, and the
accuracy columns (perplexity, greedy agreement with an FP32 reference).

measuring.run_generation runs this inside sandboxed, limited children (launch/children) the way
sweeps measure: the model folders and the text bound read-only, only JSON coming back.

The run fills results.py's GenerationResult per point (a point that did not run keeps none of
its figures); the spec it runs is backend/generate/genspec.py's.
"""

from __future__ import annotations

import resource
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from backend import energy
from backend.errors import UnavailableError, UserError
from backend.generate.footprint import KV_ITEM_BYTES, Footprint, as_held
from backend.generate.genspec import GENERATION_PRESETS, GenerationSpec  # re-exported
from backend.generate.hffootprint import model_footprint
from backend.generate.perplexity import (
    perplexity,
    read_text,
    split_margins,
    tokens_until_divergence,
)
from backend.generate.results import GenerationReport, GenerationResult
from backend.generate.roofline import PeakBandwidth, roofline
from backend.generate.timing import measure_point
from backend.hardware import visible_gpu_index
from backend.hfcheck import is_hf_only
from backend.host import describe_environment
from backend.launch.limits import limit_hit_by_exception
from backend.measure_settings import MeasureSettings
from backend.runtimeenvs import current_env_name
from backend.runtimes import GenAISession, TokenTimes, open_genai, open_torch_reference
from backend.runtimes.base import is_out_of_memory


def prompts_for(
    vocab: int, prompt_len: int, sequences: int, seed: int, text_ids: list[int] | None = None
) -> np.ndarray:
    """The prompts [sequences, prompt_len]: slices of the text's tokens when it is long enough
    (greedy agreement means more on real text), else seeded random token ids (3 .. vocab-1)."""
    if text_ids and len(text_ids) >= prompt_len + sequences:
        step = max((len(text_ids) - prompt_len) // max(sequences, 1), 1)
        return np.stack(
            [np.asarray(text_ids[i * step : i * step + prompt_len]) for i in range(sequences)]
        ).astype(np.int64)
    rng = np.random.default_rng(seed)
    return rng.integers(3, vocab, size=(sequences, prompt_len)).astype(np.int64)


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def summarize(
    result: GenerationResult, kept: list[TokenTimes], sequences: int, new_tokens: int
) -> None:
    """TTFT/ITL percentiles over the kept runs' samples and the throughputs from medians.

    Decode tokens/s is the sequences decoded per step over the inter-token latency: all of them
    for one batch, fewer where the Engine's scheduler ran them in smaller batches."""
    ttft = [t for run in kept for t in run.ttft_samples_ms]
    itl = [gap for run in kept for gap in run.itl_ms]
    e2e = [run.total_ms for run in kept]
    result.ttft_p50_ms, result.ttft_p99_ms = _percentile(ttft, 50), _percentile(ttft, 99)
    result.itl_p50_ms, result.itl_p99_ms = _percentile(itl, 50), _percentile(itl, 99)
    result.e2e_p50_ms = _percentile(e2e, 50)
    result.runs = len(kept)
    if result.e2e_p50_ms > 0:
        result.output_tokens_per_s = sequences * new_tokens / (result.e2e_p50_ms / 1e3)
    if result.itl_p50_ms > 0:
        result.decode_tokens_per_s = kept[0].concurrent / (result.itl_p50_ms / 1e3)


def run_point(
    session: GenAISession,
    shape: Footprint,
    point: tuple[int, int, int],
    prompts: np.ndarray,
    settings: MeasureSettings,
    peak: PeakBandwidth,
) -> GenerationResult:
    """One (prompt length, new tokens, sequences) point on an open session."""
    from backend.errors import runtime_error_line

    prompt_len, new_tokens, sequences = point
    result = GenerationResult(session.name, prompt_len, new_tokens, sequences)
    result.precision, result.facts = shape.precision, dict(session.facts)
    computes = session.facts.get("inference_precision")
    if computes and computes != shape.precision:  # e.g. OpenVINO's bf16 default on AMX CPUs
        result.precision = f"{shape.precision} weights, {computes} compute"
    result.weights_mb = shape.weight_bytes / 2**20
    result.kv_cache_mb = shape.kv_bytes(prompt_len + new_tokens, sequences) / 2**20
    try:
        with energy.meter_for(session.device, [visible_gpu_index()]) as meter:
            idle = meter.idle(energy.IDLE_SECONDS)  # apart, before the point: nothing running
            kept, first_ms, stable, reason, peak_mb, spent = measure_point(
                session, prompts, new_tokens, settings, meter
            )
    except Exception as exc:  # the runtime's failure is this point's result, with no figures
        error = runtime_error_line(exc)
        if is_out_of_memory(exc) or limit_hit_by_exception(exc) == "memory":
            error = out_of_memory_sentence(result, session.device) + f" ({error})"
        result.did_not_run("failed", error)
        return result
    result.energy = energy.energy_report(meter, spent, idle, per="token")
    result.facts.update(session.point_facts(sequences, kept[0].together))
    result.first_run_ms, result.stable, result.stop_reason = first_ms, stable, reason
    result.peak_rss_mb, result.rss_scope = peak_mb, "session open + this point's runs"
    summarize(result, kept, sequences, new_tokens)
    context = prompt_len + (new_tokens - 1) / 2  # mean KV length read per decode step
    read = shape
    floats = ("bf16", "fp16", "fp32")
    held = KV_ITEM_BYTES[computes] if computes in floats else 0
    stored = KV_ITEM_BYTES[shape.precision] if shape.precision in floats else 0
    # float weights held as computed: an fp32 file run in fp16 or bf16, or (torch, which loads
    # the weights in the dtype it runs) an fp16 file run in fp32
    if held and stored and (held < stored or (held > stored and session.name == "torch")):
        read = replace(
            shape,
            weight_bytes=shape.weight_bytes * held // stored,
            lookup_bytes=shape.lookup_bytes * held // stored,
            embedding_row_bytes=shape.embedding_row_bytes * held // stored,
        )
    result.roofline = roofline(  # one step reads the KV of the sequences it decodes
        read.bytes_per_step(context, kept[0].concurrent), result.itl_p50_ms, peak
    ).to_dict()
    result.tokens = kept[0].tokens.tolist()
    return result


def out_of_memory_sentence(result: GenerationResult, device: str) -> str:
    """What a point that ran out of memory asked for, in the figures a user changes: its
    sequences and tokens, the KV cache they need beside the weights, and the memory it had."""
    point = (
        f"{result.sequences:,} sequence{'s' if result.sequences != 1 else ''} of "
        f"{result.prompt_tokens:,} + {result.new_tokens:,} tokens"
    )
    needs = (
        f"their KV cache alone needs {result.kv_cache_mb:,.0f} MB beside "
        f"{result.weights_mb:,.0f} MB of weights"
    )
    if device == "cpu":
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        had = (
            f"the measuring child may use {soft // 2**20:,} MB (OPTIBOARD_CHILD_MEMORY_MB)"
            if soft != resource.RLIM_INFINITY
            else "the host's memory"
        )
    else:
        had = f"the {device} device's memory"
    return (
        f"Out of memory at {point}: {needs}, with the prefill's activations on top, and {had}; "
        "measure fewer sequences or shorter prompts."
    )


def run_runtime(
    name: str,
    folder: Path,
    spec: GenerationSpec,
    peak: PeakBandwidth,
    text: str | None,
    reference: dict[tuple[int, int, int], np.ndarray] | None,
) -> tuple[list[GenerationResult], dict[str, Any] | None]:
    """Every point of the spec on one runtime, then its perplexity on the text."""
    shape = model_footprint(folder)
    if text and 0 < shape.context_length < spec.perplexity_window:
        raise UserError(
            f"The perplexity window of {spec.perplexity_window} tokens is longer than the "
            f"model's context of {shape.context_length}; give --perplexity-window "
            f"{shape.context_length} or less."
        )
    longest = max(p + n for p, n, _ in spec.points())
    if 0 < shape.context_length < longest:
        raise UserError(
            f"A prompt plus its new tokens reaches {longest} tokens, beyond the model's context "
            f"of {shape.context_length}; give shorter --prompt-lengths or --new-tokens."
        )
    try:
        session = _open(name, folder, spec)
    except UserError as exc:
        failed = [
            GenerationResult(name, p, n, s, status="unavailable", error=str(exc))
            for p, n, s in spec.points()
        ]
        return failed, None
    shape = as_held(shape, session.facts)  # the KV cache in the type and layout it ran in
    results: list[GenerationResult] = []
    splits = []  # scored after every point: a forward pass's logits must not sit in a point's RSS
    with session:
        text_ids = session.encode(text) if text else None
        for index, point in enumerate(spec.points()):
            if index:
                session.between_points()
            prompts = prompts_for(_vocab(folder), point[0], point[2], spec.seed, text_ids)
            result = run_point(
                session, shape, point, prompts, GENERATION_PRESETS[spec.preset], peak
            )
            if reference is not None and point in reference and result.status == "ok":
                ours = np.asarray(result.tokens)
                result.agreement = tokens_until_divergence(ours, reference[point])
                splits.append((result, prompts, ours, reference[point]))
            results.append(result)
        for result, prompts, ours, theirs in splits:
            result.split_margins = split_margins(session, prompts, ours, theirs, result.agreement)
        scored = None
        if text:
            scored = perplexity(
                session,
                text_ids or [],
                spec.perplexity_window,
                spec.perplexity_chunk,
                spec.perplexity_tokens,
            ).to_dict()
    return results, scored


def _open(name: str, folder: Path, spec: GenerationSpec) -> GenAISession:
    """Each runtime gets its own CUDA-graph option, so ONNX Runtime GenAI's --cuda-graph and
    torch's --torch-compile run side by side."""
    cuda_graph, compiled = spec.cuda_graph and name != "torch", spec.torch_compile
    return open_genai(
        name, folder, spec.device, cuda_graph, spec.engine, compiled and name == "torch"
    )


def _vocab(folder: Path) -> int:
    """The vocabulary size from genai_config.json (ORT GenAI) or config.json (OpenVINO IR, a
    Hugging Face folder)."""
    import json

    genai = Path(folder) / "genai_config.json"
    if genai.is_file():
        return int(json.loads(genai.read_text())["model"]["vocab_size"])
    return int(json.loads((Path(folder) / "config.json").read_text())["vocab_size"])


def reference_tokens(
    folder: Path, spec: GenerationSpec, text: str | None
) -> dict[tuple[int, int, int], np.ndarray]:
    """The FP32 reference's greedy tokens on the same prompts (one untimed run per point): an
    ONNX Runtime GenAI FP32 folder's, or a Hugging Face folder's as transformers loads it (fp32,
    uncompiled; open_torch_reference).

    The reference runs without CUDA graphs (the plainest path), and a point the reference cannot
    run is left out (that point then has no agreement) rather than failing every point."""
    tokens = {}
    if is_hf_only(folder):
        opened = open_torch_reference(folder, spec.device)
    else:
        opened = open_genai("ort-genai", folder, spec.device, False, spec.engine)
    with opened as session:
        text_ids = session.encode(text) if text else None
        vocab = _vocab(folder)
        for prompt_len, new_tokens, sequences in spec.points():
            prompts = prompts_for(vocab, prompt_len, sequences, spec.seed, text_ids)
            try:
                found = session.generate(prompts, new_tokens).tokens
            except Exception:  # noqa: BLE001 - the measured run reports this point's failure
                continue
            tokens[(prompt_len, new_tokens, sequences)] = found
    return tokens


def _point_key(point: tuple[int, int, int]) -> str:
    return ",".join(map(str, point))


NOT_MEASURED = "greedy agreement was not measured: the reference could not run here"


def reference_failed(exc: Exception) -> str:
    """The note a run gets when its reference cannot run here (its points are still measured)."""
    return f"{NOT_MEASURED} ({exc})"


def reference_generation(request: dict[str, Any]) -> dict[str, list[list[int]]]:
    """reference_tokens as JSON ("prompt,new,sequences" -> tokens): a child of its own, so the
    reference session's memory is not in any measured runtime's peak."""
    spec = GenerationSpec.from_dict(request["spec"])
    text = read_text(Path(request["text_path"])) if request.get("text_path") else None
    found = reference_tokens(Path(request["reference"]), spec, text)
    return {_point_key(point): tokens.tolist() for point, tokens in found.items()}


def _reference_of(
    request: dict[str, Any], spec: GenerationSpec, text: str | None
) -> tuple[dict[tuple[int, int, int], np.ndarray] | None, list[str]]:
    """The reference's tokens per point (given, from reference_generation's child, or run here
    from the reference folder), and the note saying why there are none where it cannot run."""
    given = request.get("reference_tokens")
    if given is not None:
        points = [p for p in spec.points() if _point_key(p) in given]
        return {p: np.asarray(given[_point_key(p)]) for p in points}, []
    if not request.get("reference"):
        return None, []
    try:
        return reference_tokens(Path(request["reference"]), spec, text), []
    except UnavailableError as exc:  # the points still run; their agreement is unknown
        return None, [reference_failed(exc)]


def measure_generation(request: dict[str, Any]) -> dict[str, Any]:
    """The benchmark on JSON in, JSON out: the target of the sandboxed child (one per runtime,
    so each peak RSS is its own), and the in-process path. request: folder, spec, peak,
    text_path?, reference_tokens? (from reference_generation) or reference? (a folder),
    folders? (runtime -> its own folder of the same model, e.g. an OpenVINO IR or, for torch,
    the Hugging Face folder)"""
    folder = Path(request["folder"])
    spec = GenerationSpec.from_dict(request["spec"])
    peak = PeakBandwidth(**request["peak"])
    text = read_text(Path(request["text_path"])) if request.get("text_path") else None
    reference, unmeasured = _reference_of(request, spec, text)
    report = GenerationReport(str(folder), spec.to_dict(), peak.to_dict(), notes=unmeasured)
    folders = {name: Path(f) for name, f in (request.get("folders") or {}).items()}
    for name in spec.runtimes:
        results, scored = run_runtime(name, folders.get(name, folder), spec, peak, text, reference)
        for result in results:  # the environment this child ran under (backend/runtimeenvs.py)
            result.facts["runtime_env"] = current_env_name()
            result.environment = {**describe_environment(), "device": spec.device}
        report.results.extend(results)
        if scored is not None:
            report.perplexity[name] = scored
    return report.to_dict()
