"""`optiboard baseline pin|unpin|list|rerun`: baselines from a terminal, each change audited as
`cli:<os user>` like the other commands. backend/cli.py calls
`register_baseline(sub, Terminal.new)`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from backend.auth.actions import Action
from backend.auth.cli import cli_principal
from backend.counts import counted
from storage.states import JobState

if TYPE_CHECKING:
    from backend.jobs.context import Foreground

# register_baseline runs for every CLI call: the baselines (the queue, ONNX under it) and the
# audit log's store are imported by the commands that use them.


def drift_lines(baseline_id: int, rerun_id: int) -> list[str]:
    from backend import baselines

    rows = baselines.drift(baseline_id, rerun_id)
    if not rows:
        return [f"re-run {rerun_id} has no configuration measured in both jobs"]
    flagged = sum(d.flagged for d in rows)
    of = counted(len(rows), "configuration")
    head = f"re-run {rerun_id}: {flagged} of {of} beyond the interval, "
    return [head + baselines.METHOD] + [("! " if d.flagged else "  ") + d.line() for d in rows]


def cmd_pin(args: argparse.Namespace) -> int:
    from backend import baselines
    from backend.auth.audit import audited

    with audited(cli_principal(), Action.BASELINE_PIN, f"job {args.job}"):
        row = baselines.pin(args.job)
    print(f"job {row.job_id} is a baseline; re-run it with `optiboard baseline rerun {row.job_id}`")
    return 0


def cmd_unpin(args: argparse.Namespace) -> int:
    from backend import baselines
    from backend.auth.audit import audited

    with audited(cli_principal(), Action.BASELINE_UNPIN, f"job {args.job}"):
        baselines.unpin(args.job)
    print(f"job {args.job} is no longer a baseline (its re-runs stay as jobs)")
    return 0


def cmd_list(_: argparse.Namespace) -> int:
    from backend import baselines
    from backend.reporting.text import table

    pinned = baselines.list_baselines()
    if not pinned:
        print("no baselines; pin a finished sweep with `optiboard baseline pin JOB`")
        return 0
    rows = []
    for b in pinned:
        again = baselines.reruns(b.job_id)
        rows.append(
            [b.job_id, b.pinned_by, f"{b.pinned_at:%Y-%m-%d %H:%M}", len(again)]
            + [f"{again[0].id} ({again[0].state.value})" if again else "-"]
        )
    print(table(rows, ["baseline", "pinned by", "pinned at (UTC)", "re-runs", "newest"]))
    for b in pinned:
        done = [j for j in baselines.reruns(b.job_id) if j.state.finished and j.progress_done]
        if done:
            print(f"\nbaseline {b.job_id}:")
            print("\n".join(drift_lines(b.job_id, done[0].id)))
    return 0


def cmd_rerun(args: argparse.Namespace) -> int:
    from backend import baselines
    from backend.auth.audit import audited

    with audited(cli_principal(), Action.SUBMIT, f"job {args.job}", baseline_rerun=args.env):
        here = None if args.submit else args.foreground()  # its job is created held by it
        held_by = here.worker_id if here is not None else None
        job = baselines.rerun(args.job, env=args.env, model_id=args.model, held_by=held_by)
    if here is None:
        print(f"queued job {job.id}; its drift: `optiboard baseline list` once it has run")
        return 0
    print(f"job {job.id}: {job.label}, {counted(job.progress_total, 'configuration')}")
    outcome = here.run(job)
    print("\n".join(drift_lines(args.job, job.id)))
    print(f"\njob {job.id} {outcome.state.value}")
    return 0 if outcome.state == JobState.SUCCEEDED else 1


def register_baseline(
    sub: argparse._SubParsersAction, foreground: Callable[[], Foreground]
) -> None:
    """Add `baseline` and its verbs to the main parser."""
    p = sub.add_parser("baseline", help="pin a job as a baseline, re-run it, see its drift")
    verbs = p.add_subparsers(dest="baseline_command", required=True)
    v = verbs.add_parser("pin", help="pin a succeeded sweep as a baseline")
    v.add_argument("job", type=int)
    v.set_defaults(func=cmd_pin)
    v = verbs.add_parser("unpin", help="unpin a baseline (its re-runs stay)")
    v.add_argument("job", type=int)
    v.set_defaults(func=cmd_unpin)
    verbs.add_parser("list", help="baselines and their newest re-run's drift").set_defaults(
        func=cmd_list
    )
    v = verbs.add_parser(
        "rerun", help="the baseline's configurations again, judged against its samples"
    )
    v.add_argument("job", type=int)
    v.add_argument("--env", help="the runtime environment (default: the baseline's own)")
    v.add_argument("--model", type=int, help="another upload (a re-export) instead of its model")
    v.add_argument("--submit", action="store_true", help="queue it for the worker")
    v.set_defaults(func=cmd_rerun, foreground=foreground)
