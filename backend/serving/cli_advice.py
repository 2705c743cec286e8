"""`optiboard serve recommend | export | check`: the predictor's answers from a terminal.

They join the `serve` group of backend/serving/cli_verbs.py (load tests on a real server).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from backend.errors import UserError
from backend.models import library
from backend.reporting.text import table
from backend.serving.export import Device, ServingTarget, export_repository, parse_config
from backend.serving.types import BatchingPolicy, LoadSpec, Scenario

EVIDENCE_HEADERS = ["configuration", "rate under bound", "p50 ms", "p99 ms", "mean batch", "source"]


def cmd_serve_recommend(args: argparse.Namespace) -> int:
    from backend.serving.view import serve_view

    view = serve_view(args.job, args.slo, args.min_rate, args.overhead, args.server_cost)
    rows = [
        [
            e.candidate.label,
            f"{e.rate_rps:.0f}",
            f"{e.point.latency.p50:.2f}",
            f"{e.point.latency.p99:.2f}",
            f"{e.point.mean_batch:.1f}",
            "measured" if e.measured else "predicted",
        ]
        for e in view.recommendation.ranked[: args.top]
    ]
    print(table(rows, EVIDENCE_HEADERS))
    print(view.recommendation.sentence)
    return 0 if view.recommendation.best else 3


def _policy(args: argparse.Namespace) -> BatchingPolicy:
    try:
        preferred = tuple(int(p) for p in args.preferred.split(",") if p.strip())
    except ValueError:
        raise UserError(f"--preferred takes sizes such as 4,8, not {args.preferred!r}.") from None
    return BatchingPolicy(
        max_batch_size=args.max_batch_size,
        dynamic_batching=not args.no_dynamic_batching,
        preferred_batch_sizes=preferred,
        max_queue_delay_us=args.delay_us,
        instance_count=args.instances,
        preserve_ordering=args.preserve_ordering,
    )


def _load(args: argparse.Namespace) -> LoadSpec:
    if args.rate:
        return LoadSpec(Scenario.SERVER, target_rps=args.rate, duration_s=args.duration)
    return LoadSpec(Scenario.CONCURRENCY, concurrency=args.concurrency, duration_s=args.duration)


def cmd_serve_export(args: argparse.Namespace) -> int:
    library.get_model(args.model)  # a sentence when there is no such model
    source = Path(args.onnx) if args.onnx else library.onnx_path(args.model)
    device = Device.GPU if args.gpu else Device.CPU
    target = ServingTarget(
        args.name or f"model_{args.model}", _policy(args), device, args.precision
    )
    output = Path(args.output or f"{target.name}-triton.zip")
    export_repository(target, source, output, _load(args))
    print(f"wrote {output}: {target.name}/1/model.onnx, {target.name}/config.pbtxt")
    return 0


def cmd_serve_check(args: argparse.Namespace) -> int:
    path = Path(args.config)
    if not path.is_file():
        raise UserError(f"{path} is not a file; give the path of a config.pbtxt.")
    config = parse_config(path.read_text(encoding="utf-8", errors="replace"))
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
    p.add_argument("--top", type=int, default=10, help="configurations listed")
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
