"""`optiboard serve llm FOLDER ...`: a GenAI model folder on a real Triton server under load.

Joins the `serve` group (backend/cli.py passes it in). Load points are N requests in flight
(--concurrency) or Poisson arrivals (--rate); each request has a prompt of --prompt-tokens ids
and streams exactly --output-tokens tokens. With --slo-ttft-ms and --slo-itl-ms, goodput is the
rate of requests that met both.
"""

from __future__ import annotations

import argparse
import json

from backend.commas import comma_numbers
from backend.errors import UserError
from backend.reporting.text import table
from backend.serving.cli_verbs import env_from_args, env_option
from backend.serving.llm_types import LlmLoadPoint, PromptShape, TokenSlo
from backend.serving.types import LoadSpec, Scenario, ServingProvider
from backend.specs import MEASURE_PRESETS

HEADERS = [
    "load",
    "req/s",
    "TTFT p50/p99 ms",
    "ITL p50/p99 ms",
    "e2e p50/p99 ms",
    "out tok/s",
    "goodput req/s",
    "met SLO",
    "errors",
    "verdict",
]


def llm_specs(args: argparse.Namespace) -> list[LoadSpec]:
    """One LoadSpec per rate (--rate: Poisson arrivals) or per concurrency level."""
    common = {"duration_s": args.duration, "seed": args.seed}
    rates = comma_numbers(args.rate, float, "--rate")
    if rates and args.concurrency:
        raise UserError("Give --concurrency or --rate, not both: a point is closed or open loop.")
    if rates:
        return [LoadSpec(Scenario.SERVER, target_rps=rate, **common) for rate in rates]
    levels = comma_numbers(args.concurrency, int, "--concurrency") or [1]
    return [LoadSpec(Scenario.CONCURRENCY, concurrency=level, **common) for level in levels]


def slo_of(args: argparse.Namespace) -> TokenSlo | None:
    if args.slo_ttft_ms is None and args.slo_itl_ms is None:
        return None
    if any(b is not None and b <= 0 for b in (args.slo_ttft_ms, args.slo_itl_ms)):
        TokenSlo(args.slo_ttft_ms or 0, args.slo_itl_ms or 0)  # its sentence: positive bounds
    if args.slo_ttft_ms is None or args.slo_itl_ms is None:
        raise UserError("An SLO needs both bounds: give --slo-ttft-ms and --slo-itl-ms.")
    return TokenSlo(args.slo_ttft_ms, args.slo_itl_ms)


def _pair(p50: float, p99: float) -> str:
    return f"{p50:.2f} / {p99:.2f}"


def llm_row(point: LlmLoadPoint) -> list[str]:
    spec, inner = point.point.spec, point.point
    load = (
        f"{spec.target_rps:g} req/s"
        if spec.scenario is Scenario.SERVER
        else f"{spec.concurrency} in flight"
    )
    itl = _pair(point.itl.p50, point.itl.p99) if point.itl else "-"
    met = f"{point.met_slo}/{point.ttft.count}" if point.slo else "-"
    goodput = f"{point.goodput_rps:.2f}" if point.goodput_rps is not None else "-"
    return [
        load,
        f"{inner.achieved_rps:.2f}",
        _pair(point.ttft.p50, point.ttft.p99),
        itl,
        _pair(inner.latency.p50, inner.latency.p99),
        f"{point.output_tokens_per_s:.1f}",
        goodput,
        met,
        str(inner.errors),
        inner.stability_note.split(" (")[0],
    ]


def cmd_serve_llm(args: argparse.Namespace) -> int:
    from backend.generate.cli_verbs import model_folder
    from backend.serving.llm import LlmServing
    from backend.serving.llm_loadgen import serve_and_measure_llm

    serving = LlmServing(args.instances, args.sequences, ServingProvider(args.provider))
    shape = PromptShape(args.prompt_tokens, args.output_tokens)
    slo, specs = slo_of(args), llm_specs(args)

    def progress(point: LlmLoadPoint) -> None:
        if args.json:
            print(json.dumps(point.to_dict()), flush=True)

    points = serve_and_measure_llm(
        model_folder(args.folder),  # a library id, as `generate` takes, or a folder
        serving,
        specs,
        shape,
        slo=slo,
        measure=MEASURE_PRESETS[args.preset],
        on_point=progress,
        runtime_env=env_from_args(args),
    )
    if not args.json:
        ran = points[0].point.runtime_label or "an onnxruntime that did not report its version"
        print(
            f"served: {serving.label} on {args.provider}, {ran}; {shape.prompt_tokens} prompt "
            f"tokens, exactly {shape.output_tokens} output tokens per request (greedy)"
        )
        if slo:
            print(f"SLO: {slo.label} (per request)")
        print(table([llm_row(p) for p in points], HEADERS))
        for note in dict.fromkeys(n for p in points for n in p.point.notes):
            print(note)
    return 0


def register_llm_serving(group: argparse._SubParsersAction) -> None:
    """Add `serve llm` to the `serve` group."""
    p = group.add_parser("llm", help="serve a GenAI model folder on Triton, streamed, under load")
    p.add_argument(
        "folder",
        help="a generative model's id (`optiboard models`) or an ONNX Runtime GenAI model folder "
        "(genai_config.json)",
    )
    p.add_argument("--concurrency", help="requests in flight, e.g. 1,2,4 (default 1)")
    p.add_argument("--rate", help="Poisson arrivals instead, in req/s, e.g. 2,5,10")
    # generate's names too: the same two lengths, one value each here
    p.add_argument(
        "--prompt-tokens", "--prompt-lengths", type=int, default=32, help="prompt length in tokens"
    )
    p.add_argument(
        "--output-tokens", "--new-tokens", type=int, default=32, help="tokens generated, exactly"
    )
    p.add_argument("--slo-ttft-ms", type=float, help="goodput: time to first token bound, ms")
    p.add_argument("--slo-itl-ms", type=float, help="goodput: bound on a request's ITL p99, ms")
    p.add_argument("--instances", type=int, default=1, help="Triton model instances")
    p.add_argument("--sequences", type=int, default=1, help="generations each instance runs")
    p.add_argument(
        "--provider",
        choices=[p.value for p in ServingProvider],
        default=ServingProvider.CPU.value,
        help="cuda needs onnxruntime-genai-cuda in the serving environment",
    )
    p.add_argument("--duration", type=float, default=10.0, help="seconds per point")
    p.add_argument("--seed", type=int, default=0, help="seed of prompts and arrivals")
    p.add_argument("--preset", choices=list(MEASURE_PRESETS), default="quick")
    p.add_argument("--json", action="store_true", help="one JSON point per line")
    env_option(p)
    p.set_defaults(func=cmd_serve_llm)
