"""`optiboard serve recommend | export | check`: the predictor's answers from a terminal.

They join the `serve` group of backend/serving/cli_verbs.py (load tests on a real server).
register_advice runs for every CLI call, so what pulls in pandas (the stored prices), Triton's
client or ONNX (the repository export) is imported by the function that uses it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from backend.cli_parsing import dims_from_pairs as _dims
from backend.cli_parsing import output_path, positive
from backend.commas import comma_list, comma_numbers
from backend.errors import UserError
from backend.pricing import Prices, or_default, parse_prices
from backend.reporting.metrics import REGISTRY
from backend.reporting.text import table
from backend.runtimeenvs import DEFAULT
from backend.serving.cli_verbs import env_from_args, env_option, policy_of
from backend.serving.types import (
    LoadSpec,
    Scenario,
    ServingProvider,
    shortest_queue_delay_us,
)

# The predictor and Triton's confirmation (numpy's simulation under them) are imported by the
# commands: every CLI call builds this module's flags.
if TYPE_CHECKING:
    from backend.serving.recommend import Evidence, Recommendation

COST = REGISTRY["cost_per_million"]
EVIDENCE_HEADERS = [
    "configuration",
    "rate under bound",
    "p50 ms",
    "p99 ms",
    "predicted p99 ms",
    "mean batch",
    COST.cli_header,
    "source",
]


def _evidence_rows(rec: Recommendation, top: int) -> list[list[str]]:
    """One row per configuration, the default's marked (listed after the top ones when it is
    not among them); a measured row's predicted p99 is the simulation's at the rate really
    measured, beside the measured p99 (a predicted row's is its own p99)."""
    from backend.serving.cheapest import evidence_cost

    default = rec.default.candidate if rec.default is not None else None
    shown = rec.ranked[:top]
    if rec.default is not None and default not in {e.candidate for e in shown}:
        shown.append(rec.default)
    return [
        [
            e.candidate.label + (" (default)" if e.candidate == default else ""),
            f"{rate:.0f}" if (rate := rec.rate_under_bound(e)) is not None else "-",
            f"{e.point.latency.p50:.2f}",
            f"{e.point.latency.p99:.2f}",
            f"{(e.expected or e.predicted).latency.p99:.2f}",
            f"{e.point.mean_batch:.1f}",
            COST.text(evidence_cost(e) if rate is not None else None),
            _source(e),
        ]
        for e in shown
    ]


def _source(evidence: Evidence) -> str:
    from backend.serving.phrasing import unstable_input

    measured = evidence.measured
    if measured is None:
        shaky = unstable_input(evidence)
        return f"predicted; unstable sweep at {shaky}" if shaky else "predicted"
    if measured.generator_saturated:
        return "measured (client saturated)"
    verdict = "" if measured.stable else ", unstable windows"
    # its rate is the rate column's (achieved): no second rate here, only how it was offered
    how = "measured on Triton"
    if evidence.share < 0.99:  # compared only with rates measured at the same share
        how += f" (offered {evidence.share:.0%} of the rate asked: generator fell back)"
    return how + verdict


def _providers(text: str) -> tuple[ServingProvider, ...]:
    try:
        return tuple(ServingProvider(p) for p in comma_list(text))
    except ValueError:
        names = ", ".join(p.value for p in ServingProvider)
        raise UserError(f"--providers takes {names} (comma separated), not {text!r}.") from None


def _confirmed(args: argparse.Namespace) -> Recommendation:
    """Curves measured through the real server, predictions, the best few measured there."""
    from backend.serving.cheapest import with_prices
    from backend.serving.confirm import job_files, served_variants, triton_confirm
    from backend.serving.recommend import recommend, recommendation_grid

    dims, env = _dims(args.dim), env_from_args(args)
    instances = tuple(comma_numbers(args.instances, int, "--instances")) or (1,)
    grid = recommendation_grid(instances)
    probe_us = shortest_queue_delay_us(grid)
    variants = served_variants(
        job_files(args.job, _providers(args.providers) or (ServingProvider.CPU,)),
        dims=dims,
        intra_op_threads=args.threads,
        two_instances=max(instances) > 1,
        delay_probe_us=probe_us,  # how late a held batch leaves, for the delayed policies
        runtime_env=env,
    )
    variants = with_prices(variants, _prices(args))
    for variant in variants:
        how = f" (queue-delay probe {probe_us} us)" if probe_us else ""
        print(f"{variant.label}, measured on Triton{how}: {variant.curve.summary}")
    return recommend(
        variants,
        args.slo,
        min_rps=args.min_rate,
        policies=grid,
        confirm=triton_confirm(dims, args.threads, runtime_env=env),
        confirm_top=args.confirm,
        confirm_duration_s=args.duration,
    )


def cmd_serve_recommend(args: argparse.Namespace) -> int:
    from backend.serving.cheapest import recommendation_cost

    if args.confirm < 0 or args.duration <= 0:
        raise UserError("--confirm takes 0 or more configurations and --duration positive seconds.")
    if args.confirm:
        rec = _confirmed(args)
        ran = sorted({e.measured.runtime_label for e in rec.ranked if e.measured is not None})
        print(f"confirmed on {', '.join(r for r in ran if r) or 'no measured point'}")
    elif env_from_args(args) != DEFAULT:
        raise UserError(
            "--env picks the onnxruntime of the servers that --confirm starts; add --confirm N, "
            "or drop --env to predict from the sweep alone."
        )
    else:
        from backend.serving.phrasing import uncalibrated_headline
        from backend.serving.view import serve_view

        rec = serve_view(
            args.job, args.slo, args.min_rate, args.overhead, args.server_cost, prices=_prices(args)
        ).recommendation
        if headline := uncalibrated_headline(rec):  # first, above the numbers it bounds
            print(headline)
    print(table(_evidence_rows(rec, args.top), EVIDENCE_HEADERS))
    print(recommendation_cost(rec).sentence)
    # last: the recommendation's verdict, then what it rests on a line each (the page's list;
    # as one paragraph it ran to some 250 words)
    print(
        "\n".join([rec.verdict, *(f"- {d}" for d in rec.details)]) if rec.verdict else rec.sentence
    )
    return 0 if rec.best else 3


def _prices(args: argparse.Namespace) -> Prices:
    """--price, else the sweep's stored prices (older sweeps: OPTIBOARD_PRICE_PER_HOUR)."""
    from backend.records import get_job
    from backend.reporting.cost import job_prices

    if args.price:
        return parse_prices(args.price, "--price")
    return or_default(job_prices(get_job(args.job)))


def _load(args: argparse.Namespace) -> LoadSpec:
    if args.rate:
        return LoadSpec(Scenario.SERVER, target_rps=args.rate, duration_s=args.duration)
    return LoadSpec(Scenario.CONCURRENCY, concurrency=args.concurrency, duration_s=args.duration)


def cmd_serve_export(args: argparse.Namespace) -> int:
    from backend.models import library
    from backend.serving.export import (
        NOTES,
        Device,
        ServingTarget,
        export_repository,
        exported_name,
        notes_in,
    )

    library.get_model(args.model)  # a sentence when there is no such model
    source = Path(args.onnx) if args.onnx else library.onnx_path(args.model)
    device = Device.GPU if args.gpu else Device.CPU
    target = ServingTarget(
        args.name or exported_name(args.model), policy_of(args), device, args.precision
    )
    output = output_path(args.output or f"{target.name}-triton.zip")
    export_repository(target, source, output, _load(args))
    import zipfile

    with zipfile.ZipFile(output) as archive:  # read back once: every file it holds, its notes
        names, notes = archive.namelist(), notes_in(archive, target.name)
    print(f"wrote {output}: {', '.join(names)}")
    for note in notes:
        print(f"note ({target.name}/{NOTES}): {note}")
    return 0


def cmd_serve_check(args: argparse.Namespace) -> int:
    from backend.serving.export import parse_config

    path = Path(args.config)
    if not path.is_file():
        raise UserError(f"{path} is not a file; give the path of a config.pbtxt.")
    try:  # a binary file's bytes were echoed into the parse error's sentence
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path} is not text; give the path of a config.pbtxt.") from None
    config = parse_config(text)
    print(f"{path}: parses as Triton's ModelConfig (name {config.name or '-'!r}).")
    return 0


def register_advice(group: argparse._SubParsersAction) -> None:
    """Add the prediction verbs to the `serve` group."""
    p = group.add_parser("recommend", help="predict the best serving configuration under a p99")
    p.add_argument("job", type=int, help="a finished sweep with several batch sizes")
    p.add_argument("--slo", type=float, required=True, help="p99 bound in milliseconds")
    p.add_argument("--min-rate", type=float, default=0.0, help="required req/s, if any")
    p.add_argument("--overhead", type=float, default=0.3, help="ms per request outside compute")
    p.add_argument("--server-cost", type=float, default=0.1, help="ms per execution on the server")
    p.add_argument("--top", type=positive(int), default=10, help="configurations listed")
    p.add_argument(
        "--confirm",
        type=int,
        default=0,
        metavar="N",
        help="measure every variant's costs on the real Triton server, then confirm "
        "the N best predicted configurations (and the default) there",
    )
    p.add_argument(
        "--providers",
        default="cpu",
        help="with --confirm: the sweep's variants on these providers (cpu,cuda) are searched",
    )
    p.add_argument("--duration", type=float, default=5.0, help="seconds per confirming run")
    p.add_argument("--instances", default="1,2", help="instance counts searched with --confirm")
    p.add_argument("--threads", type=int, help="ONNX Runtime threads per served instance")
    p.add_argument("--dim", action="append", default=[], help="NAME=SIZE for a named dim")
    p.add_argument(
        "--price",
        metavar="TARGET=DOLLARS,...",
        help="dollars per hour per provider or cluster target, e.g. cpu=0.40,cuda=3.50 "
        "(default: the sweep's stored prices); the cheapest configuration meeting the bound",
    )
    env_option(p)
    p.set_defaults(func=cmd_serve_recommend)
    p = group.add_parser("export", help="write a Triton model repository zip")
    p.add_argument("model", type=int, help="model id (see `optiboard models`)")
    p.add_argument("--onnx", help="an optimized variant's ONNX file instead of the original")
    p.add_argument("--name", help="Triton model name (default model_<id>)")
    p.add_argument("--max-batch-size", type=int, default=16)
    p.add_argument("--preferred", default="", help="preferred batch sizes, e.g. 4,8")
    p.add_argument("--delay-us", type=int, default=0, help="max queue delay, microseconds")
    p.add_argument("--instances", type=int, default=1)
    p.add_argument("--no-dynamic-batching", action="store_true")
    p.add_argument("--preserve-ordering", action="store_true")
    p.add_argument("--gpu", action="store_true", help="KIND_GPU with the TensorRT accelerator")
    p.add_argument("--precision", default="fp32", help="TensorRT precision on --gpu: fp32, fp16")
    p.add_argument("--rate", type=float, help="perf_analyzer line for this Server rate")
    p.add_argument("--concurrency", type=int, default=8, help="or for this concurrency")
    p.add_argument("--duration", type=float, default=5.0, help="measurement interval, seconds")
    p.add_argument("-o", "--output", help="zip path (default <name>-triton.zip)")
    p.set_defaults(func=cmd_serve_export)
    p = group.add_parser("check", help="validate a config.pbtxt with Triton's protobuf")
    p.add_argument("config")
    p.set_defaults(func=cmd_serve_check)
