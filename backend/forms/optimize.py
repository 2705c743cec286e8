"""The Optimize page's choices turned into a sweep, and their submission with the uploads.

The page reads widgets and renders; what the choices mean (the providers a picked hardware
target adds, the stored file a reopened sweep keeps, the measurement a preset names, a symbolic
dimension's starting value) is decided here, so it is tested without Streamlit and the page
stays a thin view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from backend.errors import UserError
from backend.queue import jobs, uploads
from backend.queue.capabilities import ProviderTable
from backend.records import JobRow
from backend.runtimes import precision_gaps
from backend.specs import MEASURE_PRESETS, Precision, SweepSpec

DEFAULT_DIM = 16  # a symbolic dimension's value when the link names none


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


def dim_defaults(symbolic: Sequence[str], linked: Sequence[str]) -> dict[str, int]:
    """Each symbolic dimension's starting value: the link's (`dims=seq:128`), else DEFAULT_DIM;
    a value that is not a whole number is ignored rather than refused."""
    wanted = dict(part.split(":", 1) for part in linked if ":" in part and part.split(":")[1])
    return {
        name: int(wanted[name]) if wanted.get(name, "").isdigit() else DEFAULT_DIM
        for name in symbolic
    }


def node_names(text: str) -> tuple[str, ...]:
    """Node names typed one per line (the mixed INT8 point's); blank lines and spaces dropped."""
    return tuple(line.strip() for line in text.splitlines() if line.strip())


@dataclass(frozen=True)
class SweepChoices:
    """What the Optimize page's widgets hold: the sweep's knobs by their declared names (SweepSpec
    fields, e.g. {"precisions": [...], "backends": [...]}), plus what only the page speaks of: the
    measurement preset's name and where the calibration and evaluation data come from."""

    knobs: Mapping[str, Any] = field(default_factory=dict)
    preset: str | None = "standard"  # a MEASURE_PRESETS name, or jobs.CUSTOM_MEASURE
    calibration_source: str = "random"  # "stored" (the reopened sweep's), "random" or "npz"
    evaluation_source: str = "none"  # "stored", "none" or "npz"

    def __post_init__(self) -> None:
        knobs = {f.name for f in fields(SweepSpec)} - SET_BY_SPEC
        unknown = sorted(set(self.knobs) - knobs)
        if unknown:  # the page names its knobs; a wrong name is a slip in the page, not the user's
            raise ValueError(f"{unknown[0]!r} is not a knob the page sets (SweepSpec field)")

    def with_knobs(self, **knobs: Any) -> SweepChoices:
        return replace(self, knobs={**self.knobs, **knobs})

    def spec(self, prefill: SweepSpec) -> SweepSpec:
        """The sweep these choices ask for; `prefill` (the reopened sweep) lends its stored
        files and custom measurement. A refusal is one UserError sentence."""
        if not self.knobs.get("backends", ("onnxruntime",)):
            raise UserError("Pick at least one runtime.")
        return SweepSpec(
            **self.knobs,
            calibration_sha256=(
                prefill.calibration_sha256 if self.calibration_source == "stored" else None
            ),
            evaluation_sha256=(
                prefill.evaluation_sha256 if self.evaluation_source == "stored" else None
            ),
            measure=MEASURE_PRESETS.get(self.preset or "standard", prefill.measure),
        )


SET_BY_SPEC = {"calibration_sha256", "evaluation_sha256", "measure"}  # from the page's terms


@dataclass(frozen=True)
class Upload:
    """A file a widget received: its bytes and the name the user gave it."""

    data: bytes
    name: str


def submit_choices(
    choices: SweepChoices,
    spec: SweepSpec,
    model_id: int,
    calibration_file: Upload | None,
    evaluation_file: Upload | None,
    from_job: int | None = None,
    label: str | None = None,
) -> JobRow:
    """Check and store the uploads the choices asked for, then queue the sweep: the reopened
    job's changed copy when `from_job` is set, else a new job. Here so the page makes one call."""
    spec = uploads.with_calibration(
        spec,
        model_id,
        calibration_file.data if calibration_file else None,
        calibration_file.name if calibration_file else None,
        wanted=choices.calibration_source == "npz",
    )
    spec = uploads.with_evaluation(
        spec,
        model_id,
        evaluation_file.data if evaluation_file else None,
        evaluation_file.name if evaluation_file else None,
        wanted=choices.evaluation_source == "npz",
    )
    if from_job is not None:
        return jobs.resubmit_with_changes(from_job, spec, label=label)
    return jobs.submit_sweep(model_id, spec, label=label)
