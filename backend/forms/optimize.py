"""The Optimize page's choices turned into a sweep, and their submission with the uploads.

The page draws the widgets from the knob declarations (pages/components/knob_form.py) and
renders; what the choices mean (the link's values the form starts from, the providers a picked
hardware target adds, the stored file a reopened sweep keeps)
is decided here, so it is tested without Streamlit and the page stays a thin view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backend.errors import UserError
from backend.knobs import group_types
from backend.knobs.links import LinkValueError, from_query
from backend.queue import jobs, uploads
from backend.queue.capabilities import ProviderTable
from backend.records import JobRow
from backend.runtimes import precision_gaps
from backend.specs import Precision, SweepSpec


def offered_providers(
    usable: Mapping[str, list[str]],
    runtimes: Sequence[str],
    target_providers: Sequence[Mapping[str, list[str]]] = (),
) -> list[str]:
    """The providers to offer for the picked runtimes, each once: those usable here, then those
    the picked hardware targets' nodes have, even where this host lacks them."""
    merged = {runtime: list(names) for runtime, names in usable.items()}
    for providers in target_providers:
        for runtime, names in providers.items():
            merged[runtime] = list(dict.fromkeys([*merged.get(runtime, []), *names]))
    return list(dict.fromkeys(p for r in runtimes for p in merged.get(r, [])))


def unavailable_rows(table: ProviderTable) -> list[dict[str, str]]:
    """The providers a sweep cannot ask for, with why, as the rows of the page's table."""
    return [
        {"runtime": u.runtime, "provider": u.provider.upper(), "why not": u.reason}
        for u in table.unavailable()
    ]


def precision_gap_rows(
    runtimes: Sequence[str], providers: Sequence[str], precisions: Sequence[str]
) -> list[dict[str, str]]:
    """Picked precisions a runtime cannot run here, with why, as table rows: this machine's
    answer (a worker elsewhere records its own reason in the result)."""
    gaps = precision_gaps(list(runtimes), list(providers), [Precision(p) for p in precisions])
    return [
        {"runtime": g.runtime, "provider": g.provider.upper(), "precision": g.precision.label}
        | {"why not": g.reason}
        for g in gaps
    ]


def start_values(query: Mapping[str, str]) -> dict[str, Any]:
    """The sweep a link describes as SweepSpec field values by name, typed (nested groups built),
    read once per run: where the form's widgets start. Only what the link names; the runtimes
    as the spec reads them (`runtimes=`, else `backend=`). Not checked as a whole: that is the
    spec's, once, when the form's values are built (sweep_from). A value that does not read is
    one UserError sentence."""
    try:
        values = from_query(SweepSpec, query)
        for name, group in group_types(SweepSpec).items():
            if isinstance(values.get(name), Mapping):  # a group lending its knobs' keys
                values[name] = group(**values[name])
    except (ValueError, TypeError) as exc:  # the cause names the key (LinkValueError)
        raise UserError(f"This link holds a value that is not valid here ({exc}).") from exc
    values.setdefault("backends", (values.get("backend", "onnxruntime"),))
    return values


def link_start(query: Mapping[str, str]) -> tuple[dict[str, Any], UserError | None]:
    """Where the form starts from a link that may hold values that do not read: the rest of
    the link, and one sentence per dropped key naming its value and what it should hold (the
    page shows them), so one bad key does not reset every widget."""
    kept, said = dict(query), []
    for _ in range(len(query) + 1):
        try:
            values = start_values(kept)
        except UserError as problem:
            cause = problem.__cause__
            if isinstance(cause, LinkValueError) and cause.key in kept:
                bad = [cause.key]
                why = {cause.key: f"it should hold {cause.expected}"}
            else:  # a whole value refused (an unknown measurement): each key read alone
                bad = [key for key, value in kept.items() if not _reads({key: value})] or [*kept]
                why = dict.fromkeys(bad, str(problem).rstrip("."))
            for key in bad:
                said.append(
                    f"The link's {key}={str(kept.pop(key))[:60]} is not valid here ({why[key]}); "
                    "it starts at its default and the rest of the link was kept."
                )
            continue
        return values, UserError(" ".join(said)) if said else None
    return start_values({}), UserError(" ".join(said))


def _reads(query: Mapping[str, str]) -> bool:
    try:
        start_values(query)
    except UserError:
        return False
    return True


def sweep_from(
    values: Mapping[str, Any],
    start: Mapping[str, Any],
    calibration_source: str = "random",
    evaluation_source: str = "none",
) -> SweepSpec:
    """The one sweep the form asks for: the knobs it drew (`values`, by field name; what was
    not drawn takes its default) and the link's (`start`) stored calibration and evaluation
    files where their source says "stored". A refusal is one UserError sentence."""
    if not values.get("backends", ("onnxruntime",)):
        raise UserError("Pick at least one runtime.")
    kept = {
        "calibration_sha256": calibration_source == "stored",
        "evaluation_sha256": evaluation_source == "stored",
    }
    files = {name: start.get(name) if keep else None for name, keep in kept.items()}
    return SweepSpec(**(dict(values) | files))


@dataclass(frozen=True)
class Upload:
    """A file a widget received: its bytes and the name the user gave it."""

    data: bytes
    name: str


def submit_choices(
    spec: SweepSpec,
    model_id: int,
    calibration: tuple[str, Upload | None] = ("random", None),
    evaluation: tuple[str, Upload | None] = ("none", None),
    from_job: int | None = None,
    label: str | None = None,
) -> JobRow:
    """Check and store the uploads the form asked for (each a source, "npz" for an upload, and
    the file received), then queue the sweep: the reopened job's changed copy when `from_job`
    is set, else a new job. Here so the page makes one call."""
    calibration_source, calibration_file = calibration
    evaluation_source, evaluation_file = evaluation
    spec = uploads.with_calibration(
        spec,
        model_id,
        calibration_file.data if calibration_file else None,
        calibration_file.name if calibration_file else None,
        wanted=calibration_source == "npz",
    )
    spec = uploads.with_evaluation(
        spec,
        model_id,
        evaluation_file.data if evaluation_file else None,
        evaluation_file.name if evaluation_file else None,
        wanted=evaluation_source == "npz",
    )
    if from_job is not None:
        return jobs.resubmit_with_changes(from_job, spec, label=label)
    return jobs.submit_sweep(model_id, spec, label=label)
