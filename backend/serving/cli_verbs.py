"""`optiboard serve ...`: load points and latency curves on a real Triton server, from a terminal.

backend/cli.py calls `register_serving(sub)` once; further serving verbs join the same `serve`
group here, so the top-level command line keeps one entry for serving.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from backend.auth.cli import cli_principal
from backend.cli_parsing import dims_from_pairs as _dims
from backend.commas import comma_numbers
from backend.counts import counted
from backend.errors import UserError
from backend.pricing import parse_prices
from backend.reporting.text import table
from backend.serving.scenarios import OFFLINE_DEFAULT_REQUESTS
from backend.serving.types import BatchingPolicy, LoadPoint, LoadSpec, Scenario, ServingProvider
from backend.specs import MEASURE_PRESETS

POINT_HEADERS = [
    "scenario",
    "load",
    "req/s",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "queue ms",
    "compute ms",
    "mean batch",
    "J/request",
    "idle W",
    "errors",
    "verdict",
]


def model_file(model_id: int, variant: str | None) -> Path:
    """The model's ONNX file, or one of its optimized variants by file name or sha256 prefix."""
    from backend.models import library

    library.get_model(model_id)  # UserError when there is no such model
    if not variant:
        return library.onnx_path(model_id)
    matches = [
        a
        for a in library.list_artifacts(model_id)
        if a.kind == "optimized" and (a.filename == variant or a.sha256.startswith(variant))
    ]
    if len(matches) != 1:
        found = "no" if not matches else f"{len(matches)}"
        raise UserError(
            f"Model {model_id} has {found} optimized variant matching {variant!r}; "
            f"`optiboard inspect {model_id}` lists them by file name."
        )
    return library.artifact_path(matches[0].sha256)


def policy_of(
    args: argparse.Namespace, delay_us: int | None = None, instances: int | None = None
) -> BatchingPolicy:
    """The batching policy the flags describe (serve load, serve export, serve submit); submit
    passes each of its --delay-us and --instances values in turn."""
    return BatchingPolicy(
        max_batch_size=args.max_batch_size,
        dynamic_batching=not args.no_dynamic_batching,
        preferred_batch_sizes=tuple(comma_numbers(args.preferred, int, "--preferred")),
        max_queue_delay_us=args.delay_us if delay_us is None else delay_us,
        instance_count=args.instances if instances is None else instances,
        preserve_ordering=args.preserve_ordering,
    )


def specs_of(args: argparse.Namespace) -> list[LoadSpec]:
    """One LoadSpec per concurrency (or per rate for the Server scenario)."""
    scenario = Scenario(args.scenario)
    common = {
        "duration_s": args.duration,
        "samples_per_request": args.samples,
        "seed": args.seed,
        "requests": args.requests,
    }
    if scenario is Scenario.SERVER:
        rates = comma_numbers(args.rate, float, "--rate")
        if not rates:
            raise UserError("The server scenario needs --rate, e.g. --rate 100,200,400.")
        return [LoadSpec(scenario, target_rps=rate, **common) for rate in rates]
    if scenario is Scenario.CONCURRENCY:
        levels = comma_numbers(args.concurrency, int, "--concurrency") or [1]
        return [LoadSpec(scenario, concurrency=level, **common) for level in levels]
    return [LoadSpec(scenario, **common)]


def point_row(point: LoadPoint) -> list[str]:
    spec = point.spec
    if point.scenario is Scenario.SERVER:
        load = f"{spec.target_rps:g} req/s"
        if point.generator_processes > 1:
            load += f" ({point.generator_processes} senders)"
    elif point.scenario is Scenario.OFFLINE:
        load = f"bursts of {spec.requests or OFFLINE_DEFAULT_REQUESTS}"
    else:
        load = f"{spec.concurrency} in flight"
    verdict = "saturated client" if point.generator_saturated else point.stability_note
    return [
        point.scenario.value,
        load,
        f"{point.achieved_rps:.1f}",
        f"{point.latency.p50:.2f}",
        f"{point.latency.p90:.2f}",
        f"{point.latency.p99:.2f}",
        f"{point.queue_ms:.2f}",
        f"{point.compute_ms:.2f}",
        f"{point.mean_batch:.1f}",
        *energy_cells(point),
        str(point.errors),
        verdict.split(" (")[0],
    ]


def energy_cells(point: LoadPoint) -> list[str]:
    """J per request over the point's window and idle power, '-' where not measured."""
    spent = point.energy
    if spent is None or not spent.measured or spent.j_p50 is None:
        return ["-", "-"]
    return [f"{spent.j_p50:.4g}", "-" if spent.idle_w is None else f"{spent.idle_w:.1f}"]


def cmd_serve_load(args: argparse.Namespace) -> int:
    from backend.serving.loadgen import serve_and_measure

    path = model_file(args.model, args.variant)
    policy, specs = policy_of(args), specs_of(args)
    measure = MEASURE_PRESETS[args.preset]

    def progress(point: LoadPoint) -> None:
        if args.json:
            print(json.dumps(point.to_dict()), flush=True)

    points = serve_and_measure(
        path,
        policy,
        specs,
        measure=measure,
        dims=_dims(args.dim),
        intra_op_threads=args.threads,
        on_point=progress,
        provider=ServingProvider(args.provider),
        runtime_env=env_from_args(args),
    )
    if not args.json:
        used = ", ".join(points[0].session_providers + points[0].session_options)
        used = used or "not reported"
        print(
            f"policy: {points[0].policy.label}; provider {args.provider} (session: {used}); "
            f"{points[0].runtime_label or 'onnxruntime version not reported'}"
        )
        for note in points[0].notes:
            print(note)
        print(table([point_row(p) for p in points], POINT_HEADERS))
        for source in sorted({p.energy.source for p in points if p.energy is not None}):
            print(f"J/request, idle W: {source}")
        for point in points:
            if point.generator_saturated:
                print(f"{point.spec.target_rps:g} req/s: {point.stability_note}")
    return 0


def cmd_serve_curve(args: argparse.Namespace) -> int:
    from backend.serving.curve import measure_model_curve

    curve, ran = measure_model_curve(
        model_file(args.model, args.variant),
        comma_numbers(args.batch_sizes, int, "--batch-sizes"),
        requests_per_size=args.requests,
        dims=_dims(args.dim),
        intra_op_threads=args.threads,
        provider=ServingProvider(args.provider),
        runtime_env=env_from_args(args),
    )
    print(f"served on {ran or 'an onnxruntime that did not report its version'}")
    rows = [[b, f"{ms:.3f}"] for b, ms in zip(curve.batch_sizes, curve.compute_ms, strict=True)]
    print(table(rows, ["batch", "compute ms (median)"]))
    print(
        f"overhead per request {curve.overhead_ms:.3f} ms, compute spread "
        f"{curve.compute_jitter:.2f} (coefficient of variation: sigma / median)"
    )
    return 0


def _variants(model_id: int, names: list[str]) -> list:
    """The variants a study serves, by file name or sha256 prefix ("original": the upload)."""
    from backend.serving.study import ORIGINAL, model_variants

    known = model_variants(model_id)
    chosen = []
    for name in names or [ORIGINAL]:
        matches = [v for v in known if name in (v.name, v.key) or v.sha256.startswith(name)]
        if len(matches) != 1:
            raise UserError(
                f"Model {model_id} has {'no' if not matches else len(matches)} variant matching "
                f"{name!r}; `optiboard inspect {model_id}` lists them by file name."
            )
        chosen.append(matches[0])
    return chosen


def cmd_serve_submit(args: argparse.Namespace) -> int:
    """Queue a serving study; the worker starts Triton for each variant x policy and measures.
    Audited as `cli:<os user>` like a sweep's `submit` (a refused study is recorded `failed`)."""
    from backend.auth.audit import Action, audited
    from backend.knobs.flags import knob_values
    from backend.serving.study import ServingStudy, submit_study

    with audited(cli_principal(), Action.SUBMIT, f"model {args.model}", kind="serving"):
        policies = [
            policy_of(args, delay, count)
            for delay in comma_numbers(args.delay_us, int, "--delay-us") or [0]
            for count in comma_numbers(args.instances, int, "--instances") or [1]
        ]
        study = ServingStudy(
            variants=tuple(_variants(args.model, args.variant)),
            policies=tuple(policies),
            loads=tuple(specs_of(args)),
            slo_p99_ms=args.slo,
            measure=args.preset,
            dims=tuple(_dims(args.dim).items()),
            intra_op_threads=args.threads or 0,
            provider=ServingProvider(args.provider),
            prices=parse_prices(args.price, "--price") if args.price else (),
            **knob_values(ServingStudy, args),  # --env
        )
        job = submit_study(args.model, study, label=args.label)
        print(
            f"queued job {job.id}: {counted(study.point_count, 'load point')} over "
            f"{counted(len(study.variants) * len(study.policies), 'server configuration')}; "
            f"follow it with `optiboard show {job.id} --log` or on the Serve page (?study={job.id})"
        )
    return 0


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", type=int, help="model id (see `optiboard models`)")
    parser.add_argument("--variant", help="an optimized variant's file name or sha256 prefix")
    parser.add_argument("--dim", action="append", default=[], help="NAME=SIZE for a named dim")
    parser.add_argument("--threads", type=int, help="ONNX Runtime intra-op threads per instance")
    _provider_option(parser)


def _provider_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--provider",
        choices=[p.value for p in ServingProvider],
        default=ServingProvider.CPU.value,
        help="ONNX Runtime provider of the served model (cuda: KIND_GPU instances on GPU 0)",
    )


def env_from_args(args: argparse.Namespace) -> str:
    """--env, read as a study reads it."""
    from backend.knobs.flags import knob_values
    from backend.serving.study import ServingStudy

    return knob_values(ServingStudy, args)["runtime_env"]


def env_option(parser: argparse.ArgumentParser) -> None:
    """--env NAME, as ServingStudy declares it (the same knob as a sweep's)."""
    from backend.knobs.flags import add_knob_arguments
    from backend.serving.study import ServingStudy

    add_knob_arguments(parser, ServingStudy)


def _load_options(parser: argparse.ArgumentParser, many: bool = False) -> None:
    """Policy and load flags; many=True: --delay-us and --instances take lists (one policy
    each)."""
    each = ", a list makes one policy each" if many else ""
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument("--preferred", help="preferred batch sizes, e.g. 4,8")
    parser.add_argument(
        "--delay-us",
        type=str if many else int,
        default=None if many else 0,
        help=f"max queue delay, microseconds{each}",
    )
    parser.add_argument(
        "--instances",
        type=str if many else int,
        default=None if many else 1,
        help=f"model instances{each}",
    )
    parser.add_argument("--no-dynamic-batching", action="store_true")
    parser.add_argument("--preserve-ordering", action="store_true")
    parser.add_argument(
        "--scenario", choices=[s.value for s in Scenario], default=Scenario.CONCURRENCY.value
    )
    parser.add_argument("--concurrency", help="requests in flight, e.g. 1,4,16")
    parser.add_argument("--rate", help="Server scenario target rates in req/s, e.g. 100,200")
    parser.add_argument("--requests", type=int, help="Offline: requests per burst")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per point")
    parser.add_argument("--samples", type=int, default=1, help="samples per request")
    parser.add_argument("--seed", type=int, default=0, help="seed of data and Server arrivals")
    parser.add_argument("--preset", choices=list(MEASURE_PRESETS), default="standard")
    parser.add_argument("--json", action="store_true", help="one JSON LoadPoint per line")


def register_serving(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The `serve` group and its verbs; returns the group so more verbs can join it."""
    group = sub.add_parser("serve", help="load tests on a real Triton server").add_subparsers(
        dest="serve_command", required=True
    )
    p = group.add_parser("load", help="serve a model on Triton and measure load points")
    _model_options(p)
    _load_options(p)
    env_option(p)
    p.set_defaults(func=cmd_serve_load)
    p = group.add_parser("curve", help="measure compute time per batch size on Triton")
    _model_options(p)
    p.add_argument("--batch-sizes", default="1,2,4,8,16")
    p.add_argument("--requests", type=int, default=30, help="requests per batch size")
    env_option(p)
    p.set_defaults(func=cmd_serve_curve)
    p = group.add_parser("submit", help="queue a serving study for the worker (real Triton)")
    p.add_argument("model", type=int, help="model id (see `optiboard models`)")
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        help="a variant to serve: original, or an optimized file name / sha256 prefix (repeat)",
    )
    p.add_argument("--dim", action="append", default=[], help="NAME=SIZE for a named dim")
    p.add_argument("--threads", type=int, help="ONNX Runtime intra-op threads per instance")
    _provider_option(p)
    p.add_argument("--slo", type=float, default=10.0, help="p99 bound in ms, drawn with the points")
    p.add_argument("--label", help="a label for the job")
    p.add_argument(
        "--price",
        metavar="TARGET=DOLLARS,...",
        help="dollars per hour, e.g. cpu=0.40,cuda=3.50 (default OPTIBOARD_PRICE_PER_HOUR); "
        "stored with the study, which names the cheapest configuration meeting its bound",
    )
    _load_options(p, many=True)
    env_option(p)
    p.set_defaults(func=cmd_serve_submit, preset="quick")
    return group
