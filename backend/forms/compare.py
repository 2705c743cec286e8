"""What a Compare link's `jobs=` asks for that the sweep comparison cannot show, said per job.

A link may name a job that was deleted, a word, a serving study or a regression check (each has
its own view), or, in a read-only link changed after it was signed, a job its signature does not
cover. The page used to drop them all and say only "Pick at least one job above."; here each
dropped value gets one sentence and, where it has one, the view that does show it. Decided here
so it is tested without Streamlit.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from backend.errors import UserError
from backend.queue import jobs
from backend.records import JobKind

_ELSEWHERE = {  # a job kind Compare's sweep view does not draw -> (what it is, its view)
    JobKind.SERVING: ("a serving study", "serve", {"study": "{id}"}),
    JobKind.REGRESSION: ("a regression check", "compare", {"view": "regression", "jobs": "{id}"}),
    JobKind.GENERATION: (
        "a generation benchmark",
        "compare",
        {"view": "generation", "jobs": "{id}"},
    ),
}
_PAGE_NAMES = {"serve": "the Serve page", "compare": "Compare's own view for it"}


def job_view(kind: JobKind, job_id: int) -> tuple[str, dict[str, str]]:
    """The page (url_path) and query that show a job's results: Compare's sweep view for a
    sweep, else its kind's own view (a link to ?jobs= of a generation job opened on "Pick at
    least one job above")."""
    if kind not in _ELSEWHERE:
        return "compare", {"jobs": str(job_id)}
    _, page, query = _ELSEWHERE[kind]
    return page, {key: value.format(id=job_id) for key, value in query.items()}


@dataclass(frozen=True)
class DroppedJob:
    """One value of the link's jobs= that is not shown: the sentence, and the view that shows
    it (page url_path and query) where there is one."""

    sentence: str
    job_id: int | None = None
    page: str | None = None
    query: dict[str, str] = field(default_factory=dict)


def _job_list(ids: Sequence[int]) -> str:
    names = [str(i) for i in ids]
    text = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return ("job " if len(names) == 1 else "jobs ") + text


def dropped_jobs(
    asked: Sequence[str], offered: Collection[int], signed: Sequence[int] | None = None
) -> list[DroppedJob]:
    """Every value of `asked` (the link's jobs=, as written) that is not among `offered` (the
    sweeps the picker offers), each with why; `signed`: the jobs a read-only link's signature
    covers (None: not such a link), whose other jobs are one sentence together."""
    dropped: list[DroppedJob] = []
    unsigned: list[int] = []
    for text in dict.fromkeys(asked):
        if not text.isdigit():
            dropped.append(DroppedJob(f"The link's jobs= holds {text[:40]!r}, not a job number."))
            continue
        job_id = int(text)
        if job_id in offered:
            continue
        if signed is not None and job_id not in signed:
            unsigned.append(job_id)
            continue
        try:
            job = jobs.get_job(job_id)
        except UserError:
            dropped.append(DroppedJob(f"There is no job {job_id}: deleted, or a mistyped link."))
            continue
        if job.kind in _ELSEWHERE:
            what, page, query = _ELSEWHERE[JobKind(job.kind)]
            dropped.append(
                DroppedJob(
                    f"Job {job_id} is {what}, not a sweep: it is shown on {_PAGE_NAMES[page]}.",
                    job_id,
                    page,
                    {key: value.format(id=job_id) for key, value in query.items()},
                )
            )
        else:  # a sweep the picker does not offer (no results and finished)
            dropped.append(DroppedJob(f"Job {job_id} has no results to compare."))
    if unsigned:
        covered = _job_list(sorted(signed or ())) if signed else "no job"
        plural = len(unsigned) > 1
        dropped.append(
            DroppedJob(
                f"This read-only link's signature covers only {covered}; {_job_list(unsigned)}, "
                f"also in its address, {'are' if plural else 'is'} not shown."
            )
        )
    return dropped
