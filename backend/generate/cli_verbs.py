"""`optiboard generate FOLDER ...`: the generation benchmark and its accuracy columns, from a
terminal. backend/cli.py calls `register_generate(sub)` once."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.commas import comma_list, comma_numbers
from backend.counts import counted
from backend.errors import UserError
from backend.generate.dramshare import held_in, in_cache_notes, of_peak
from backend.generate.genspec import GENERATION_PRESETS, GenerationSpec
from backend.reporting.metrics import cell
from backend.reporting.provenance import ran_line
from backend.reporting.text import table
from backend.runtimes import ENGINE_MODES

if TYPE_CHECKING:  # the run (numpy, the runtimes) is imported by the command
    from backend.generate.results import GenerationReport, GenerationResult

HEADERS = [
    "runtime",
    "precision",
    "prompt",
    "new",
    "seqs",
    "TTFT p50/p99 ms",
    "ITL p50/p99 ms",
    "out tok/s",
    "decode tok/s",
    "e2e ms",
    "weights MB",
    "KV MB",
    "peak RSS MB",
    "GB/s",
    "of peak",
    "agree",
    "ppl",
    "J/token",
    "verdict",
]


def _ints(text: str, flag: str) -> tuple[int, ...]:
    values = tuple(comma_numbers(text, int, flag))
    if not values:
        raise UserError(f"{flag} needs at least one value, e.g. {flag} 1,4.")
    return values


def _shared(args: argparse.Namespace) -> dict[str, Any]:
    """The flags a measurement here and a queued generation job read alike."""
    return {
        "runtimes": tuple(comma_list(args.runtimes)),
        "device": args.device,
        "prompt_lengths": _ints(args.prompt_lengths, "--prompt-lengths"),
        "new_tokens": _ints(args.new_tokens, "--new-tokens"),
        "sequences": _ints(args.sequences, "--sequences"),
        "preset": args.preset,
        "seed": args.seed,
        "perplexity_window": args.perplexity_window,
        "perplexity_tokens": args.perplexity_tokens,
        "perplexity_chunk": args.perplexity_chunk,
        "cuda_graph": args.cuda_graph,
        "engine": args.engine,
        "torch_compile": args.torch_compile,
    }


def spec_of(args: argparse.Namespace) -> GenerationSpec:
    return GenerationSpec(**_shared(args))


def rows_of(report: GenerationReport) -> list[list[str]]:
    rows = []
    for r in report.results:
        if r.status != "ok":
            continue
        roof = r.roofline
        ppl = report.perplexity.get(r.runtime, {}).get("perplexity")
        agree = f"{min(r.agreement)}/{r.new_tokens}" if r.agreement else "-"
        rows.append(
            [
                r.runtime,
                r.precision,
                str(r.prompt_tokens),
                str(r.new_tokens),
                str(r.sequences),
                f"{cell(r.ttft_p50_ms, '.2f')}/{cell(r.ttft_p99_ms, '.2f')}",
                f"{cell(r.itl_p50_ms, '.3f')}/{cell(r.itl_p99_ms, '.3f')}",
                cell(r.output_tokens_per_s, ".1f"),  # '-' where a figure is None (results.py)
                cell(r.decode_tokens_per_s, ".1f"),
                cell(r.e2e_p50_ms, ".1f"),
                cell(r.weights_mb, ".1f"),
                cell(r.kv_cache_mb, ".2f"),
                cell(r.peak_rss_mb, ".0f"),
                f"{roof.get('achieved_bytes_s', 0) / 1e9:.2f}",
                of_peak(roof),
                agree,
                f"{ppl:.3f}" if ppl is not None else "-",
                f"{r.energy.j_p50:.4g}" if r.energy and r.energy.j_p50 is not None else "-",
                "stable" if r.stable else "unstable",
            ]
        )
    return rows


def roofline_notes(points: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Why a share of peak is not a DRAM figure: the cache's sentence once, naming the points
    it covers (it was one line a point), any other note beside its point's name; the old
    sentence for a share above 100% where the cache size was not recorded."""
    cached = [
        (name, cache, roof["bytes_per_step"] / 2**20)
        for name, roof in points
        if (cache := held_in(roof))
    ]
    lines = in_cache_notes(cached, len(points))
    lines += [
        f"of peak, {name}: {roof['note']}"
        for name, roof in points
        if roof.get("note") and not held_in(roof)
    ]
    unrecorded = [  # CPU points stored before the cache was recorded beside the roofline
        roof["bytes_per_step"]
        for _, roof in points
        if roof and "in_cache" not in roof and "copy" in roof.get("peak", {}).get("source", "")
    ]
    if unrecorded:
        lines.append(
            f"of peak: {len(unrecorded)} point{' was' if len(unrecorded) == 1 else 's were'} "
            "stored before the CPU's last-level cache "
            f"was recorded with them, so whether their {max(unrecorded) / 2**20:.3g} MiB or less "
            "per step sat in cache (and the share is not of DRAM bandwidth) is unknown; run the "
            "job again to have it said"
        )
    if not lines and any(roof.get("fraction", 0) > 1 for _, roof in points):
        lines.append(
            "a fraction above 100%: the bytes a step reads fit in the CPU caches, so that decode "
            "is not bound by memory bandwidth"
        )
    return lines


def explain(report: GenerationReport) -> list[str]:
    """What ran, the peak the fractions are of, every runtime or point that did not run, and
    where a point's tokens left the reference."""
    from backend.generate.perplexity import split_note  # numpy: not for the parser's import

    lines = [f"peak bandwidth: {report.peak_bandwidth['source']}"]
    seen: set[str] = set()
    for r in report.results:
        if r.status == "ok" and r.runtime not in seen:
            seen.add(r.runtime)
            lines.append(ran_line(r.runtime, r.facts, r.environment))
        elif r.status != "ok" and f"{r.runtime}:{r.error}" not in seen:
            seen.add(f"{r.runtime}:{r.error}")
            lines.append(f"{r.runtime} {r.status}: {r.error}")

    def point(r: GenerationResult) -> str:
        return f"{r.runtime} {r.prompt_tokens},{r.new_tokens},{r.sequences}"

    lines += roofline_notes([(point(r), r.roofline) for r in report.results if r.status == "ok"])
    for name, scored in report.perplexity.items():
        lines.append(
            f"{name} perplexity {scored['perplexity']:.3f} on {scored['tokens']} of "
            f"{scored['text_tokens']} tokens (windows of {scored['window']}, "
            f"{scored['chunk']} tokens per step through the KV cache)"
        )
    for source in sorted({r.energy.source for r in report.results if r.energy is not None}):
        lines.append(f"J/token: {source}")
    splits = (
        split_note(point(r), r.agreement, r.new_tokens, r.split_margins) for r in report.results
    )
    return lines + [line for line in splits if line] + report.notes


def model_folder(model: str) -> Path:
    """A library model id (a generative model's GenAI folder) or a folder path."""
    if model.isdigit():
        from backend.generate.library import genai_folder

        return genai_folder(int(model))
    return Path(model)


def cmd_submit_generation(args: argparse.Namespace) -> int:
    """--submit: queue the benchmark as a job of a library model (the worker runs it)."""
    from backend.generate.jobspec import GenerationJobSpec, submit_generation
    from backend.generate.measuring import check_text_size
    from backend.knobs.flags import knob_values

    if not args.model.isdigit():
        raise UserError(
            f"--submit queues a library model by its id (`optiboard models`), not {args.model!r}; "
            "upload the folder as a .zip first, or drop --submit to measure it here."
        )
    here_only = {
        "--in-process": args.in_process,
        "--openvino-folder": args.openvino_folder,
        "--openvino-from": args.openvino_from,
        "--torch-from": args.torch_from,
        "--reference": args.reference,
        "--json": args.json,
    }
    given = [flag for flag, value in here_only.items() if value]
    if given:
        raise UserError(
            f"{given[0]} is for a measurement here, not a queued job (which runs the library "
            f"model's own folders, FP32 its reference); drop {given[0]} or --submit."
        )
    spec = GenerationJobSpec(
        **knob_values(GenerationJobSpec, args),  # --variants, each name read by variantnames
        **_shared(args),
        runtime_env=args.env,
    )
    text = check_text_size(Path(args.perplexity_text)) if args.perplexity_text else None
    job = submit_generation(
        int(args.model),
        spec,
        text.read_bytes() if text else None,
        text.name if text else None,
        label=args.label,
    )
    print(
        f"queued job {job.id} with {counted(job.progress_total, 'generation point')}; follow it "
        f"with `optiboard show {job.id} --log` or on the Compare page "
        f"(?view=generation&jobs={job.id})"
    )
    return 0


def _refuse_job_only(args: argparse.Namespace) -> None:
    """--variants and --label belong to a queued job; a run here measured the folder as it is
    and dropped them in silence (`--variants int4` measured FP32 only)."""
    from backend.generate.jobspec import GenerationJobSpec
    from backend.knobs.flags import knob_values

    if knob_values(GenerationJobSpec, args)["variants"] != GenerationJobSpec().variants:
        raise UserError(
            "--variants names the weight-only variants a queued job builds from a library model; "
            "add --submit, or drop --variants to measure the folder as it is."
        )
    if args.label is not None:
        raise UserError("--label names a queued job; add --submit or drop --label.")


def cmd_generate(args: argparse.Namespace) -> int:
    from backend.generate.measuring import openvino_from, run_generation

    if args.submit:
        return cmd_submit_generation(args)
    _refuse_job_only(args)
    if args.in_process and args.model.isdigit():
        raise UserError(
            f"--in-process runs the model in this terminal's own process, outside the sandbox, so "
            f"it takes a folder of your own, not library model {args.model} (an upload); drop "
            "--in-process to measure it in the sandboxed child."
        )

    openvino = Path(args.openvino_folder) if args.openvino_folder else None
    if args.openvino_from and not openvino:
        openvino = openvino_from(Path(args.openvino_from))
    notes = []
    if not openvino and args.model.isdigit() and "openvino-genai" in args.runtimes:
        from backend.generate.variants import openvino_folder

        try:  # the library model's own export (once per model), from its uploaded HF folder
            openvino = openvino_folder(int(args.model)).folder
        except UserError as exc:
            notes.append(f"openvino-genai has no OpenVINO folder of model {args.model}: {exc}")
    torch_hf = Path(args.torch_from) if args.torch_from else None
    if not torch_hf and args.model.isdigit() and "torch" in args.runtimes:
        from backend.generate.variants import hf_folder

        try:  # the library model's uploaded Hugging Face folder (kept once per model)
            torch_hf = hf_folder(int(args.model))
        except UserError as exc:
            notes.append(f"torch has no Hugging Face folder of model {args.model}: {exc}")
    reference = Path(args.reference) if args.reference else None
    if reference is None and args.model.isdigit():  # its uploaded weights, as a job judges torch
        reference = torch_hf
    report = run_generation(
        model_folder(args.model),
        spec_of(args),
        Path(args.perplexity_text) if args.perplexity_text else None,
        reference,
        openvino_folder=openvino,
        torch_folder=torch_hf,
        in_process=args.in_process,
        runtime_env=args.env,
        progress=lambda line: print(f"measuring {line}", file=sys.stderr, flush=True),
    )
    report.notes[:0] = notes
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
        return 0
    rows = rows_of(report)
    if rows:
        print(table(rows, HEADERS))
    print("\n".join(explain(report)))
    return 0 if rows else 1


def _torch_arguments(p: argparse.ArgumentParser) -> None:
    """The torch runtime's flags (transformers + PyTorch on a Hugging Face folder)."""
    p.add_argument(
        "--torch-from",
        help="the Hugging Face folder (config.json, *.safetensors) the torch runtime opens; a "
        "Hugging Face folder given as the model is used for torch itself",
    )
    p.add_argument(
        "--torch-compile",
        action="store_true",
        help="the torch runtime on CUDA: torch.compile the decode step (fused Triton kernels, "
        "coordinate descent tuning) and replay it as one CUDA graph per shape, compiled and "
        "captured before the timed runs",
    )


def register_generate(sub: argparse._SubParsersAction) -> None:
    """The `generate` verb and its flags.

    Why long: one add_argument per flag, read top to bottom like the verb's --help."""
    p = sub.add_parser(
        "generate",
        help="generation benchmark of a GenAI model folder: TTFT, ITL, tokens/s, memory, "
        "bandwidth roofline, perplexity, greedy agreement",
    )
    p.add_argument(
        "model",
        help="a generative model's id (`optiboard models`), a GenAI model folder, or (for "
        "--runtimes torch) a Hugging Face folder",
    )
    p.add_argument("--prompt-lengths", default="128", help="prompt tokens, e.g. 128,1024")
    p.add_argument("--new-tokens", default="64", help="tokens generated per sequence (exactly)")
    p.add_argument("--sequences", default="1", help="concurrent sequences (a batch), e.g. 1,4")
    p.add_argument("--runtimes", default="ort-genai", help="ort-genai,openvino-genai,torch")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument(
        "--cuda-graph",
        action="store_true",
        help="ONNX Runtime GenAI on CUDA: replay each decode step as a CUDA graph",
    )
    p.add_argument(
        "--engine",
        choices=list(ENGINE_MODES),
        default="auto",
        help="ONNX Runtime GenAI's Engine, one Request per sequence: auto above the Generator's "
        "32 sequences (and for PagedAttention models), on for every point, off never",
    )
    p.add_argument("--perplexity-text", help="a UTF-8 text file to score perplexity on")
    p.add_argument("--perplexity-tokens", type=int, default=1024, help="tokens of it scored")
    p.add_argument("--perplexity-window", type=int, default=256, help="tokens per KV cache")
    p.add_argument("--perplexity-chunk", type=int, default=32, help="tokens appended per step")
    p.add_argument("--openvino-folder", help="the same model as an OpenVINO GenAI IR folder")
    p.add_argument(
        "--openvino-from", help="a Hugging Face folder to export for openvino-genai (cached)"
    )
    _torch_arguments(p)
    p.add_argument(
        "--reference",
        help="what greedy agreement compares with: an FP32 GenAI folder, or a Hugging Face folder "
        "(run in fp32, uncompiled, by transformers); a library model run with torch defaults to "
        "its uploaded Hugging Face folder",
    )
    p.add_argument("--preset", choices=list(GENERATION_PRESETS), default="standard")
    p.add_argument("--seed", type=int, default=0, help="seed of the random prompts")
    p.add_argument(
        "--in-process",
        action="store_true",
        help="measure a folder of your own here, not in the sandboxed child (never a library id)",
    )
    p.add_argument(
        "--env",
        default="default",
        help="the runtime environment the children run under (optiboard envs); it needs "
        "onnxruntime-genai for ort-genai",
    )
    p.add_argument("--json", action="store_true", help="the whole report as JSON")
    p.add_argument(
        "--submit",
        action="store_true",
        help="queue it as a job of the library model (the worker runs it; Compare plots it live)",
    )
    from backend.generate.jobspec import GenerationJobSpec
    from backend.knobs.flags import add_knob_arguments

    add_knob_arguments(p, GenerationJobSpec)  # --variants, as the spec declares it
    p.add_argument("--label", help="with --submit: the job's label")
    p.set_defaults(func=cmd_generate)
