"""Command line: everything the dashboard does, from a terminal. `python -m backend.cli --help`."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import settings
from backend.auth.cli import register_users, run_command
from backend.baselinecli import register_baseline
from backend.cli_parsing import JobNumbers, job_list, measure_from, positive
from backend.cli_parsing import dims_from_pairs as _dims
from backend.cli_reports import cmd_compare, cmd_export, cmd_jobs, cmd_show
from backend.compat_cli import register_compat
from backend.counts import byte_size, counted
from backend.engine.mixed_args import add_arguments as add_mixed_arguments
from backend.errors import UserError
from backend.generate.cli_verbs import register_generate
from backend.jobs.regresscli import register_regress
from backend.knobs.flags import add_knob_arguments, knob_values
from backend.queue.worker_args import add_worker_arguments
from backend.serving.cli_advice import register_advice
from backend.serving.cli_verbs import register_serving
from backend.serving.llm_cli import register_llm_serving
from backend.specs import MEASURE_PRESETS, SweepSpec
from storage.states import JobState

# Every call builds the whole parser, so what only some commands need (the queue and ONNX under it,
# pandas, the runtimes) is imported inside them: tests/backend/test_cli_imports.py holds the line.
if TYPE_CHECKING:
    from backend.jobs.context import JobOutcome, OnResult
    from backend.records import JobRow
    from backend.results import ConfigurationResult


def _spec(args: argparse.Namespace) -> SweepSpec:
    """The sweep the flags ask for: every knob read from its declaration (backend.knobs.flags),
    then the uploads (--calibration, --evaluation) and the measurement preset."""
    from backend.queue import jobs

    calibration = None
    if args.calibration:
        calibration = jobs.store_calibration(
            args.model, Path(args.calibration), Path(args.calibration).name, _dims(args.dim)
        )
    evaluation = None
    if args.evaluation:  # refused when it is the calibration file
        path = Path(args.evaluation)
        evaluation = jobs.store_evaluation(
            args.model, path, path.name, _dims(args.dim), calibration
        )
    return SweepSpec(
        **knob_values(SweepSpec, args),
        calibration_sha256=calibration,
        evaluation_sha256=evaluation,
        measure=measure_from(args),
    )


def cmd_add(args: argparse.Namespace) -> int:
    from backend.models import library
    from backend.models.ingest import ingest_file

    path = Path(args.path)
    if path.is_dir():
        raise UserError(
            f"{path} is a folder; zip its files and add the zip (cd {path} && zip -r "
            f"../{path.name}.zip .): Hugging Face, SavedModel and GenAI folders are added so."
        )
    if path.exists() and not path.is_file():  # /dev/null, a pipe: "there is no file" was wrong
        raise UserError(f"{path} is not a regular file; give the path of a model file.")
    if not path.is_file():
        raise UserError(f"There is no file {path}; give the path of a model file.")
    model = ingest_file(path, path.name, name=args.name, copy=args.copy)
    print(
        f"added model {model.id}: {model.name} ({model.format}, opset {model.opset}, "
        f"{byte_size(model.size_bytes)}, {model.parameter_count:,} parameters)"
    )
    for line in library.export_check(library.list_artifacts(model.id)):
        print(line)
    for warning in model.warnings:
        print(f"warning: {warning}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from backend.models import library
    from backend.models.origin import origin_short
    from backend.reporting.text import table

    rows = [
        [
            m.id,
            m.name,
            m.format,
            m.opset,
            byte_size(m.size_bytes),
            m.node_count,
            f"{m.parameter_count:,}",
            origin_short(m),
        ]
        for m in library.list_models()
    ]
    print(
        table(rows, ["id", "name", "format", "opset", "size", "nodes", "parameters", "origin"])
        if rows
        else "no models yet: add one with `optiboard add model.onnx`"
    )
    return 0


def _shape(spec: dict[str, Any]) -> str:
    return f"{spec['name']}: {spec['dtype']}[{', '.join(str(d) for d in spec['shape'])}]"


def cmd_inspect(args: argparse.Namespace) -> int:
    from backend.models import library
    from backend.models.origin import origin_sentence
    from backend.reporting.text import table

    if not args.model.isdigit():  # a file given: argparse said "invalid int value"
        raise UserError(
            f"inspect takes a library model's id, not {args.model!r}; add a file first with "
            "`optiboard add FILE`, or list the ids with `optiboard models`."
        )
    m = library.get_model(int(args.model))
    print(
        f"model {m.id}: {m.name}\n  format {m.format}, opset {m.opset}, IR {m.ir_version}, "
        f"producer {m.producer}\n  {counted(m.node_count, 'node')}, "
        f"{m.parameter_count:,} parameters, {m.size_bytes:,} bytes, sha256 {m.sha256}"
    )
    print(f"  {origin_sentence(m) or 'Uploaded.'}")
    print("inputs:\n" + "\n".join(f"  {_shape(i)}" for i in m.inputs))
    print("outputs:\n" + "\n".join(f"  {_shape(o)}" for o in m.outputs))
    ops = sorted(m.op_histogram.items(), key=lambda kv: -kv[1])
    width = max((len(op) for op, _ in ops), default=0) + 2  # "com.microsoft::..." is long
    print("ops:\n" + "\n".join(f"  {op:<{width}}{count}" for op, count in ops))
    for warning in m.warnings:
        print(f"warning: {warning}")
    arts = library.list_artifacts(m.id)
    rows = [[a.kind, a.filename, f"{a.size_bytes:,}", a.sha256[:12]] for a in arts]
    print("artifacts:\n" + table(rows, ["kind", "file", "bytes", "sha256"]))
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from backend.queue import jobs

    job = jobs.submit_sweep(args.model, _spec(args), label=args.label)
    print(
        f"queued job {job.id} with {counted(job.progress_total, 'configuration')}; "
        f"follow it with `optiboard show {job.id}`"
    )
    return 0


@dataclass(frozen=True)
class Terminal:
    """This terminal as a worker of its own (backend.jobs.context.Foreground), for `run`,
    `regress` and `baseline rerun`: the command creates its job already claimed by worker_id,
    in the one INSERT, so a worker polling beside it (scripts/run always starts one) can never
    take it between the job's creation and this process's start (it reads every provider to
    register, long enough for a worker to claim a queued job first)."""

    worker_id: str

    @classmethod
    def new(cls) -> Terminal:
        from backend.queue.worker import worker_id_for_this_process

        return cls(worker_id_for_this_process())

    def run(self, job: JobRow, on_result: OnResult | None = None) -> JobOutcome:
        """Run the job this terminal holds; stored like any job."""
        from backend.queue.worker import JobRunner, register
        from storage.repo import jobs as job_store

        if job.worker_id != self.worker_id:  # only a job created held by it (held_by)
            raise RuntimeError(f"job {job.id} is not held by this terminal")
        register(self.worker_id)
        lease = job_store.HELD_LEASE_S  # the one it was created with, renewed while it runs
        return JobRunner(self.worker_id, lease_seconds=lease, on_result=on_result).run(job)


def cmd_run(args: argparse.Namespace) -> int:
    """Run a sweep now in this terminal; it is stored like any job."""
    from backend.cli_reports import cheapest_line
    from backend.jobs.knee import knee_summary
    from backend.queue import jobs
    from backend.reporting.text import gpu_table, results_table, why_lines

    here = Terminal.new()
    job = jobs.submit_sweep(
        args.model, _spec(args), label=args.label or "cli run", held_by=here.worker_id
    )
    collected: list[ConfigurationResult] = []

    def progress(result: ConfigurationResult, index: int, total: int) -> None:
        collected.append(result)
        width = 30
        filled = round(width * len(collected) / total)
        bar = "#" * filled + "." * (width - filled)
        status = f"p50 {result.latency.p50:.3f} ms" if result.ok else result.status.value
        print(f"[{bar}] {len(collected)}/{total} {result.config_key}: {status}", flush=True)

    print(f"job {job.id}: {counted(job.progress_total, 'configuration')}")
    outcome = here.run(job, progress)
    print("\n" + results_table(collected, jobs.spec_of(job).prices))
    if sentence := cheapest_line([job.id]):
        print(sentence)
    if gpu := gpu_table(collected):
        print("\n" + gpu)
    why = why_lines(collected)
    if why:
        print("\nwhy:\n" + "\n".join(why))
    if knee := knee_summary(jobs.spec_of(job), jobs.stored_results(job.id)):
        print("\nknee:\n" + "\n".join(f"  {line}" for line in knee))
    print(f"\njob {job.id} {outcome.state.value}")
    return 0 if outcome.state == JobState.SUCCEEDED else 1


def cmd_cancel(args: argparse.Namespace) -> int:
    from backend.queue import jobs

    state = jobs.cancel_job(args.job)
    said = jobs.cancel_said(args.job, state)
    if state in (JobState.SUCCEEDED, JobState.FAILED):
        raise UserError(said)
    print(said)
    return 0


def cmd_providers(args: argparse.Namespace) -> int:
    from backend.reporting.text import table
    from backend.runtimes import all_provider_statuses

    rows = []
    for runtime, statuses in all_provider_statuses().items():
        for s in statuses:
            rows.append([runtime, s.name, "yes" if s.available else "no", s.reason])
    print(table(rows, ["runtime", "provider", "available", "detail"]))
    return 0


def cmd_mixed(args: argparse.Namespace) -> int:
    """The engine's mixed-precision search, handed the queue's submit (the engine cannot
    import the queue, which stands above it). The search itself changes nothing; `--submit`
    queues a job, audited as `cli:<os user>` like `optiboard submit`."""
    from backend.auth.audit import Action, audited
    from backend.auth.cli import cli_principal
    from backend.engine import mixedcli
    from backend.queue import jobs

    def submit(model_id: int, spec: SweepSpec, label: str) -> int:
        with audited(cli_principal(), Action.SUBMIT, f"model {model_id}", via="mixed --submit"):
            return jobs.submit_sweep(model_id, spec, label=label).id

    return mixedcli.run_command(args, submit=submit)


def cmd_worker(args: argparse.Namespace) -> int:
    from backend.queue.worker import run_from_args

    return run_from_args(args)


def _add_sweep_options(parser: argparse.ArgumentParser) -> None:
    """The model, the sweep's knobs as declared (backend.knobs.flags), and what is not a knob:
    the files to upload, the measurement preset and the job's label."""
    parser.add_argument("model", type=int, help="model id (see `optiboard models`)")
    add_knob_arguments(parser, SweepSpec)
    parser.add_argument("--calibration", help=".npz of real input samples for static INT8")
    parser.add_argument(
        "--evaluation", help=".npz of inputs (and optional int `labels`) to score task accuracy"
    )
    parser.add_argument(
        "--preset",
        default="standard",
        choices=list(MEASURE_PRESETS),
        help="measurement preset, the same as the Optimize page's (default: standard)",
    )
    parser.add_argument("--quick", action="store_true", help="same as --preset quick")
    parser.add_argument(
        "--max-seconds", type=float, help="time cap per configuration, overriding the preset's"
    )
    parser.add_argument("--label", help="a name for the job")


def _price_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--price",
        metavar="TARGET=DOLLARS,...",
        help="price the results by this table (e.g. cpu=0.40,cuda=3.50) instead of the job's",
    )


def _register_add(sub: Any) -> None:
    p = sub.add_parser(
        "add", help="add a model (.onnx, .zip with external data, SavedModel .zip, PyTorch .pt2)"
    )
    p.add_argument("path")
    p.add_argument("--name")
    p.add_argument(
        "--copy", action="store_true", help="add it as a new model even if the library has it"
    )
    p.set_defaults(func=cmd_add)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="optiboard", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _register_add(sub)
    sub.add_parser("models", help="list models").set_defaults(func=cmd_models)
    p = sub.add_parser("inspect", help="show a model's metadata")
    p.add_argument("model", help="a library model's id (`optiboard models`)")
    p.set_defaults(func=cmd_inspect)
    for verb, func, what in (
        ("submit", cmd_submit, "queue a sweep for the worker"),
        ("run", cmd_run, "run a sweep now, in the foreground, without a worker"),
    ):
        p = sub.add_parser(verb, help=what)
        _add_sweep_options(p)
        p.set_defaults(func=func)
    p = sub.add_parser("jobs", help="list jobs")
    p.add_argument("--limit", type=positive(int), default=50)
    p.set_defaults(func=cmd_jobs)
    p = sub.add_parser("show", help="show a job and its results")
    p.add_argument("job", type=int)
    p.add_argument("--log", action="store_true", help="also print the job's events")
    p.add_argument("--slo", type=float, help="a serving study's p99 bound in ms (default: its own)")
    _price_option(p)
    p.set_defaults(func=cmd_show)
    p = sub.add_parser("compare", help="compare sweeps as the Compare page does, in a table")
    p.add_argument("job", type=job_list, nargs="+", action=JobNumbers, help="e.g. 7 8 or 7,8")
    _price_option(p)
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("cancel", help="cancel a queued or running job")
    p.add_argument("job", type=int)
    p.set_defaults(func=cmd_cancel)
    p = sub.add_parser("export", help="export results (or a study's load points) as CSV or JSON")
    p.add_argument("job", type=job_list, nargs="+", action=JobNumbers, help="e.g. 7 8 or 7,8")
    p.add_argument("--format", choices=["csv", "json", "html"], default="csv")
    p.add_argument("-o", "--output")
    _price_option(p)
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("providers", help="which runtimes and providers work here, and why not")
    p.set_defaults(func=cmd_providers)
    p = sub.add_parser(
        "mixed", help="search the fastest INT8/FP32 mix meeting a bound; --submit queues it"
    )
    add_mixed_arguments(p)
    p.set_defaults(func=cmd_mixed)
    p = sub.add_parser("worker", help="run a worker (same as python -m backend.queue.worker)")
    add_worker_arguments(p)
    p.set_defaults(func=cmd_worker)
    for register in (register_compat, register_users, register_generate):
        register(sub)
    register_regress(sub, Terminal.new)
    register_baseline(sub, Terminal.new)
    serving = register_serving(sub)
    register_advice(serving)
    register_llm_serving(serving)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if settings.report_problems():  # before anything reads one deep inside a command
        return 2
    try:
        return run_command(args)  # audited when it changes something
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `optiboard jobs | head` closed the pipe: no traceback for it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # as Python's docs say
        return 141  # what a shell reports for SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
