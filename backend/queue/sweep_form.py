"""The Optimize page's choices turned into a sweep, and their submission with the uploads.

The page reads widgets and renders; what the choices mean (the providers a picked hardware
target adds, the stored file a reopened sweep keeps, the measurement a preset names, a symbolic
dimension's starting value) is decided here, so it is tested without Streamlit and the page
stays a thin view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from backend.errors import UserError
from backend.queue import jobs, uploads
from backend.queue.capabilities import ProviderTable
from backend.records import JobRow
from backend.runtimes import precision_gaps
from backend.specs import (
    DEFAULT_MIN_COSINE,
    MEASURE_PRESETS,
    CudaOptions,
    IoMode,
    PerformanceHint,
    Precision,
    SweepSpec,
    TrtOptions,
)

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
    """What the Optimize page's widgets hold, in their own terms (a preset's name, where the
    calibration and evaluation data come from); `spec` makes the sweep of them."""

    precisions: Sequence[str]
    runtimes: Sequence[str]
    providers: Sequence[str]
    batch_sizes: Sequence[int]
    shapes: str | None  # "fixed" or "dynamic"
    dims: Mapping[str, int]
    level: str | None
    threads: int
    simplify: bool
    hint: str | None
    streams: int
    preset: str | None  # a MEASURE_PRESETS name, or jobs.CUSTOM_MEASURE: the reopened sweep's
    calibration_source: str  # "stored" (the reopened sweep's), "random" or "npz" (an upload)
    calibration_samples: int
    evaluation_source: str  # "stored", "none" or "npz"
    profile: bool
    fp32_nodes: tuple[str, ...]
    targets: Sequence[str]
    replicas: int
    io_modes: tuple[IoMode, ...]
    cuda: CudaOptions
    find_knee: bool
    tensorrt: TrtOptions
    min_cosine: float = DEFAULT_MIN_COSINE  # outputs below it against FP32 are wrong, not ok

    def spec(self, prefill: SweepSpec) -> SweepSpec:
        """The sweep these choices ask for; `prefill` (the reopened sweep) lends its stored
        files and custom measurement. A refusal is one UserError sentence."""
        if not self.runtimes:
            raise UserError("Pick at least one runtime.")
        return SweepSpec(
            precisions=tuple(self.precisions),
            providers=tuple(self.providers),
            batch_sizes=tuple(self.batch_sizes),
            backends=tuple(self.runtimes),
            performance_hint=self.hint or PerformanceHint.LATENCY,
            streams=self.streams,
            fixed_shapes=self.shapes != "dynamic",
            symbolic_dims=tuple(self.dims.items()),
            optimization_level=self.level or "all",
            intra_op_threads=self.threads,
            simplify=self.simplify,
            calibration_sha256=(
                prefill.calibration_sha256 if self.calibration_source == "stored" else None
            ),
            calibration_samples=self.calibration_samples,
            evaluation_sha256=(
                prefill.evaluation_sha256 if self.evaluation_source == "stored" else None
            ),
            measure=MEASURE_PRESETS.get(self.preset or "standard", prefill.measure),
            profile=self.profile,
            fp32_nodes=self.fp32_nodes,
            targets=tuple(self.targets),
            replicas=self.replicas,
            io_modes=self.io_modes,
            cuda=self.cuda,
            find_knee=self.find_knee,
            tensorrt=self.tensorrt,
            min_cosine=self.min_cosine,
        )


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
