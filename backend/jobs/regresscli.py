"""`optiboard regress MODEL[,MODEL...] --env-b ort-1.31 ...` and `optiboard envs`: the regression
check from a terminal (several models, a comma list as every list flag takes: one check, each
model timed interleaved on A and B). backend/cli.py calls `register_regress(sub)` once."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from backend.cli_parsing import dims_from_pairs
from backend.commas import comma_list, comma_numbers
from backend.counts import counted
from backend.errors import UserError
from backend.jobs.regressspec import (
    MAX_PROCESSES,
    MIN_ROUNDS,
    PROCESSES,
    RegressionSpec,
    submit_regression,
)
from backend.reporting import regression_defaults as stats
from backend.reporting.text import table
from backend.runtimeenvs import DEFAULT, describe
from backend.specs import MEASURE_PRESETS
from storage.states import JobState

if TYPE_CHECKING:
    from backend.jobs.context import Foreground


def spec_of(args: argparse.Namespace) -> RegressionSpec:
    from dataclasses import replace

    measure = MEASURE_PRESETS[args.preset]
    if args.max_seconds is not None:
        measure = replace(measure, max_seconds=args.max_seconds)
    return RegressionSpec(
        env_a=args.env_a,
        env_b=args.env_b,
        runtime=args.runtime,
        precisions=tuple(comma_list(args.precisions)),
        batch_sizes=tuple(comma_numbers(args.batch_sizes, int, "--batch-sizes")),
        dims=tuple(dims_from_pairs(args.dim).items()),
        threads=args.threads,
        threads_b=args.threads_b,
        model_b=args.model_b,
        preset=args.preset,
        measure=measure,
        resamples=args.resamples,
        confidence=args.confidence,
        min_change=args.min_change,
        seed=args.seed,
        profile=not args.no_profile,
        min_rounds=args.rounds,
        processes=args.processes,
    )


def report(job_id: int) -> str:
    """The check's table and, where slower, the ops that changed (from the stored results)."""
    from backend.jobs.regressview import pair_rows, text_report
    from backend.records import JobKind, get_job, stored_results

    job = get_job(job_id)
    if job.kind != JobKind.REGRESSION:
        raise UserError(f"Job {job_id} is not a regression check; `optiboard show {job_id}`.")
    spec = RegressionSpec.from_dict(job.spec)
    stored = stored_results(job_id)
    return text_report(spec, pair_rows(spec, stored, job.model_id), job.model_id)


def cmd_regress(args: argparse.Namespace) -> int:
    """Queue the check (--submit) or run it now in this terminal, then print its report."""
    if args.report is not None:
        print(report(args.report))
        return 0
    models = comma_numbers(args.model, int, "MODEL")
    if not models:
        raise UserError("Name the model to check: optiboard regress MODEL --env-b NAME.")
    spec = spec_of(args)
    here = None if args.submit else args.foreground()  # its job is created held by it
    held_by = here.worker_id if here is not None else None
    job = submit_regression(models, spec, label=args.label, held_by=held_by)
    if here is None:
        print(f"queued job {job.id}; its report: `optiboard regress --report {job.id}`")
        return 0
    several = f" on each of {len(models)} models" if len(models) > 1 else ""
    print(
        f"job {job.id}: {spec.env_a} against {spec.env_b}, "
        f"{counted(len(spec.configurations()), 'configuration')}{several}, timed interleaved"
    )
    outcome = here.run(job)
    print(report(job.id))
    print(f"\njob {job.id} {outcome.state.value}")
    return 0 if outcome.state == JobState.SUCCEEDED else 1


def cmd_envs(_: argparse.Namespace) -> int:
    rows = [[r["name"], r["pins"], r["state"]] for r in describe()]
    print(table(rows, ["environment", "pins", "state"]))
    return 0


def register_regress(sub: argparse._SubParsersAction, foreground: Callable[[], Foreground]) -> None:
    """Add `regress` and `envs` to the main parser; foreground makes this terminal a worker of
    its own that runs the check here (backend/cli.py's, the one command module that starts the
    worker's loop)."""
    p = sub.add_parser(
        "regress", help="the same configurations on two runtime environments, with a verdict"
    )
    p.add_argument(
        "model", nargs="?", help="the model (library id), or several as a comma list: 3,4,5"
    )
    p.add_argument("--env-a", default=DEFAULT, help="the environment to compare against")
    p.add_argument("--env-b", default=DEFAULT, help="the environment checked (optiboard envs)")
    p.add_argument(
        "--model-b", type=int, help="B runs this model instead (a re-export; one model only)"
    )
    p.add_argument(
        "--runtime",
        default="onnxruntime",
        help="the runtime both sides run: onnxruntime or openvino (its environments' versions)",
    )
    p.add_argument("--precisions", default="fp32", help="comma list, e.g. fp32,int8_dynamic")
    p.add_argument("--batch-sizes", default="1", help="comma list, e.g. 1,8")
    p.add_argument("--dim", action="append", default=[], help="NAME=VALUE, a symbolic dim")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: the runtime's)")
    p.add_argument("--threads-b", type=int, help="B's own thread count")
    p.add_argument("--preset", choices=list(MEASURE_PRESETS), default="quick")
    p.add_argument("--max-seconds", type=float, help="time cap per side, over the preset's")
    p.add_argument("--resamples", type=int, default=stats.RESAMPLES)
    p.add_argument("--confidence", type=float, default=stats.CONFIDENCE)
    p.add_argument(
        "--min-change",
        type=float,
        default=stats.MIN_CHANGE,
        help="the smallest change called slower or faster (0.05: 5%%)",
    )
    p.add_argument("--seed", type=int, default=stats.SEED, help="the bootstrap's seed")
    p.add_argument("--no-profile", action="store_true", help="skip the per-op profiles")
    p.add_argument(
        "--rounds",
        type=int,
        default=MIN_ROUNDS,
        help="A B rounds at least per configuration, time cap permitting",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=PROCESSES,
        help=f"processes each side is measured in, one A B pair after another, sharing the "
        f"rounds and the time cap (1 to {MAX_PROCESSES}); the interval then covers the offset "
        "between processes; each one more costs a session start a side",
    )
    p.add_argument("--submit", action="store_true", help="queue it for the worker")
    p.add_argument("--report", type=int, metavar="JOB", help="print a stored check's report")
    p.add_argument("--label")
    p.set_defaults(func=cmd_regress, foreground=foreground)
    sub.add_parser("envs", help="runtime environments and whether each is set up").set_defaults(
        func=cmd_envs
    )
