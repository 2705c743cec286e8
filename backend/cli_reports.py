"""`optiboard jobs`, `show`, `export` and `compare`: stored jobs in a terminal, each kind as its
page shows it. Sweeps and regression checks read the results table (backend/reporting), generation
jobs and serving studies their stored points (backend/generate/jobreport.py, backend/serving/
studyreport.py); an export mixing those is refused in one sentence, as their columns differ.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from backend.baselinecli import drift_lines
from backend.cli_parsing import output_path, write_output
from backend.errors import UserError
from backend.jobkind import JobKind
from backend.jobs.knee import knee_summary
from backend.jobs.regresscli import report as regression_report
from backend.pricing import Prices, parse_prices
from backend.reporting.text import results_table, why_lines
from backend.serving.study import runtime_line as serving_runtime_line

# The queue and the stored rows (SQLAlchemy) are imported by the commands: every CLI call
# imports this module to build its parser.
if TYPE_CHECKING:
    from backend.records import JobRow
    from backend.results import StoredResult

KIND_NAMES = {
    JobKind.SWEEP: "a sweep",
    JobKind.REGRESSION: "a regression check",
    JobKind.GENERATION: "a generation benchmark",
    JobKind.SERVING: "a serving study",
}


def _prices(args: argparse.Namespace, stored: Prices = ()) -> Prices:
    return parse_prices(args.price, "--price") if args.price else stored


def cheapest_line(job_ids: list[int], prices: Prices = ()) -> str | None:
    """The cheapest stable configuration of the jobs and the runner-up, as Compare says it."""
    from backend.reporting import comparison

    return comparison.cheapest_sentence(comparison.priced_frame(job_ids, prices))


def cmd_jobs(args: argparse.Namespace) -> int:
    """The newest jobs, one a line; a failed one's error in full under the table."""
    from backend.queue import jobs
    from backend.reporting.text import footnoted, last_line, table

    listed = jobs.list_jobs(limit=args.limit)
    marks, errors = footnoted([last_line(j.error) for j in listed])  # in full, under the table
    rows = [
        [
            j.id,
            j.kind,  # as stored: a listing names a newer version's kind rather than failing
            j.model_id,
            j.state.value,
            f"{j.progress_done}/{j.progress_total}",
            j.attempts,
            j.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            mark,
        ]
        for j, mark in zip(listed, marks, strict=True)
    ]
    headers = ["id", "kind", "model", "state", "progress", "attempts", "created (UTC)", "error"]
    empty = "no jobs yet: submit one with `optiboard submit MODEL_ID`"
    print("\n".join([table(rows, headers), *errors]) if rows else empty)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from backend.queue import jobs
    from backend.records import job_kind

    job = jobs.get_job(args.job)
    kind = job_kind(job)
    if args.slo is not None and kind != JobKind.SERVING:
        raise UserError("--slo is a serving study's p99 bound; this job is not a serving study.")
    unit = {JobKind.GENERATION: "generation points", JobKind.SERVING: "load points"}
    print(
        f"job {job.id}: model {job.model_id}, {job.state.value}, "
        f"{job.progress_done}/{job.progress_total} {unit.get(kind, 'configurations')}, "
        f"attempt {job.attempts}"
    )
    if job.error:
        print(f"error: {job.error}")
    if kind == JobKind.SERVING:  # what ran its served model, then the Serve page's view
        from backend.serving import studyreport

        print(serving_runtime_line(job))
        print("\n".join(studyreport.show_lines(job.id, _prices(args), args.slo)))
    if kind == JobKind.GENERATION:  # its points, what ran them and what each share of peak is
        from backend.generate import jobreport

        print("\n".join(jobreport.show_lines(job.id, _prices(args))))
    stored = jobs.stored_results(job.id)
    if stored:
        _show_results(args, job, kind, stored)
    if args.log:
        for event in jobs.job_events(job.id):
            print(f"{event.created_at:%H:%M:%S} {event.level:<8}{event.message}")
    return 0


def _show_results(
    args: argparse.Namespace, job: JobRow, kind: JobKind, stored: list[StoredResult]
) -> None:
    """A sweep's or a regression check's results: the table, the cheapest, why, and the knee,
    the regression report or the drift against a baseline."""
    from backend.queue import jobs

    job_id, results = job.id, [item.result for item in stored]
    sweep = jobs.spec_of(job) if kind == JobKind.SWEEP else None
    prices = _prices(args, sweep.prices if sweep else ())  # a regression's spec is not a sweep
    print(results_table(results, prices))
    # a regression check's two sides are one configuration on two environments, not rivals
    if kind == JobKind.SWEEP and (sentence := cheapest_line([job_id], prices)):
        print(sentence)
    why = why_lines(results)
    if why:
        print("why:\n" + "\n".join(why))
    if kind == JobKind.REGRESSION:  # both sides, the verdict and the op diff
        print("\n" + regression_report(job_id))
    elif sweep and (knee := knee_summary(sweep, stored)):
        print("knee:\n" + "\n".join(f"  {line}" for line in knee))
    if sweep and sweep.baseline_of:  # a baseline's re-run: its drift against the baseline
        print("\n" + "\n".join(drift_lines(sweep.baseline_of, job_id)))


def _kinds(job_ids: list[int]) -> dict[int, JobKind]:
    from backend.queue import jobs
    from backend.records import job_kind

    return {j: job_kind(jobs.get_job(j)) for j in job_ids}


def _jobs(ids: list[int]) -> str:
    return f"Job {ids[0]} is" if len(ids) == 1 else f"Jobs {', '.join(map(str, ids))} are"


def export_family(job_ids: list[int]) -> JobKind:
    """The kind of the jobs an export covers (sweeps and regression checks read the same
    results); generation jobs or serving studies beside another kind are refused in one
    sentence, as generation jobs always were (backend/generate/jobreport.py)."""
    kinds = _kinds(job_ids)
    for kind in (JobKind.GENERATION, JobKind.SERVING):  # their own points, their own columns
        ones = [j for j, k in kinds.items() if k == kind]
        if ones and len(ones) < len(job_ids):
            other = [j for j in job_ids if j not in ones]
            raise UserError(
                f"{_jobs(ones)} {KIND_NAMES[kind]} and {_jobs(other).lower()} not, and their "
                "columns differ; export them separately."
            )
    return next(iter(kinds.values()))


def cmd_export(args: argparse.Namespace) -> int:
    """CSV: the comparison table (a study's: the Serve page's table of measured points). JSON:
    every result's full record (environment, samples), a generation job's or a study's stored
    points. HTML: sweeps' report as the Compare page's download builds it."""
    from backend.queue import jobs
    from backend.reporting import comparison, exports

    prices = _prices(args)
    target = output_path(args.output) if args.output else None  # before the export is read
    kind = export_family(args.job)
    if args.format == "html":  # the Compare page's report, from the page's own builder
        data, count = _html_report(args.job, prices)
    elif kind == JobKind.GENERATION:
        from backend.generate import jobreport

        data, count = jobreport.export_generation(args.job, args.format, prices)
    elif kind == JobKind.SERVING:
        from backend.serving import studyreport

        data, count = studyreport.export_studies(args.job, args.format, prices)
    else:
        frame = comparison.priced_frame(args.job, prices)  # --price instead of the jobs' own
        if frame.empty:
            raise UserError(f"Jobs {', '.join(map(str, args.job))} have no results to export yet.")
        count, stored = len(frame), [r for j in args.job for r in jobs.stored_results(j)]
        csv = args.format == "csv"
        data = exports.export_csv(frame) if csv else exports.results_records_json(stored)
    if target:
        write_output(target, data)
        noun = "record" if kind == JobKind.SERVING else "result"
        print(f"wrote {count} {noun}{'' if count == 1 else 's'} to {args.output}")
    else:
        sys.stdout.write(data.decode())
    return 0


def _html_report(job_ids: list[int], prices: Prices) -> tuple[bytes, int]:
    """The Compare page's "HTML report" of sweeps, with the page's default choices."""
    from backend.reporting import htmlreport

    for job_id, kind in _kinds(job_ids).items():
        if kind != JobKind.SWEEP:
            raise UserError(
                f"Job {job_id} is {KIND_NAMES[kind]}, not a sweep; --format html is the Compare "
                "page's report of sweeps, so export it as csv or json."
            )
    text, count = htmlreport.default_html(job_ids, prices)
    if count == 0:
        have = _jobs(job_ids).replace(" is", " has").replace(" are", " have")
        raise UserError(
            f"{have} no measured configuration to report; `optiboard show {job_ids[0]}` says why."
        )
    return text.encode("utf-8"), count


def cmd_compare(args: argparse.Namespace) -> int:
    """The Compare page's table for sweeps, the cheapest configuration and what ran."""
    from backend.reporting import comparison

    for job_id, kind in _kinds(args.job).items():
        if kind != JobKind.SWEEP:
            raise UserError(
                f"Job {job_id} is {KIND_NAMES[kind]}, not a sweep; compare takes sweeps only, "
                f"and `optiboard show {job_id}` prints it."
            )
    print("\n".join(comparison.compare_lines(args.job, _prices(args))))
    return 0
