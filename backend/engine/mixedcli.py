"""`optiboard mixed` and `python -m backend.engine.mixedcli`: the mixed-precision search on a
library model, run in one sandboxed child (the upload is built, opened and timed throughout, as a
queued search's steps are in the worker's sandboxed children), printed step by step, and with
--submit the best mix queued as a sweep.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import settings
from backend.engine import mixed
from backend.engine.mixed import MAX_STEPS
from backend.engine.mixed_args import add_arguments
from backend.engine.mixedresult import AccuracyBound
from backend.errors import UserError
from backend.knobs.serialize import to_json
from backend.specs import Configuration, MeasureSettings, Precision, SweepSpec

# Queues a sweep of a model under a label and gives the job's id. The engine never imports the
# queue (it stands above the engine), so the caller above passes it in: `optiboard mixed`.
Submit = Callable[[int, SweepSpec, str], int]


def _base(source: Path, pairs: list[str]) -> Configuration:
    """Static INT8 with the --dim values, each checked against the model's own names."""
    from backend.cli_parsing import dims_from_pairs
    from backend.engine.shapes import check_dim_names, dim_params_of

    dims = dims_from_pairs(pairs)
    check_dim_names(dims, dim_params_of(source))
    return Configuration(precision=Precision.INT8_STATIC, symbolic_dims=tuple(dims.items()))


def run_command(args: argparse.Namespace, submit: Submit | None = None) -> int:
    """Search, print each measured step and the verdict against plain FP32, and with --submit
    (only where the caller passes `submit`: `optiboard mixed`) queue FP32, INT8 and the best mix
    as a profiled sweep (its results join the Compare page and the accuracy-vs-speed chart)."""
    import sys

    from backend.models import library
    from backend.specs import MEASURE_PRESETS

    try:
        if args.submit and submit is None:  # refused before the search, not after it
            raise UserError(
                "--submit queues a job, which the engine alone cannot; run "
                "`python -m backend.cli mixed` with the same arguments."
            )
        AccuracyBound.parse(args.bound)  # a malformed bound is refused before any child
        measure = MEASURE_PRESETS["quick" if args.quick else "standard"]
        source = library.onnx_path(args.model)
        base = _base(source, args.dim)
        found = search_in_sandbox(source, args.bound, measure, base)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(found.lines))
    print(found.verdict)
    if found.best is None:
        print("nothing to submit")
        return 1
    if submit is not None and args.submit:  # a best step of no FP32 node is plain INT8
        spec = SweepSpec(
            precisions=(Precision.FP32, Precision.INT8_STATIC),
            symbolic_dims=base.symbolic_dims,
            fp32_nodes=found.best,
            profile=True,
            measure=measure,
        )
        job_id = submit(args.model, spec, f"mixed precision, {args.bound}")
        plain = "" if found.best else " (the best step keeps no node in FP32: plain INT8 static)"
        print(f"queued job {job_id}{plain}; follow it with `optiboard show {job_id}`")
    return 0


@dataclass(frozen=True)
class SearchReport:
    """What a search in the sandbox printed and found: its steps, its verdict and the FP32 nodes
    of the best step (None: no step met the bound)."""

    lines: list[str]
    verdict: str
    best: tuple[str, ...] | None

    @classmethod
    def from_child(cls, data: Any) -> SearchReport:
        """A sandboxed child's answer, checked (the uploaded model ran there)."""
        if not isinstance(data, dict):
            raise UserError("The mixed-precision search's child answered what does not read.")
        lines, verdict, best = data.get("lines"), data.get("verdict"), data.get("best")
        texts = isinstance(lines, list) and all(isinstance(line, str) for line in lines)
        nodes = best is None or isinstance(best, list) and all(isinstance(n, str) for n in best)
        if not (texts and isinstance(verdict, str) and nodes):
            raise UserError("The mixed-precision search's child answered what does not read.")
        return cls(lines, verdict, None if best is None else tuple(best))


def search_in_sandbox(
    source: Path, bound: str, measure: MeasureSettings, base: Configuration
) -> SearchReport:
    """search() on an uploaded model in one sandboxed child (refused where none works), as the
    worker runs a queued search's steps: it builds, opens and times the model throughout."""
    from backend.launch import sandbox
    from backend.launch.children import call_in_child
    from backend.launch.limits import ChildLimits

    refused = sandbox.needed_for("The mixed-precision search runs the uploaded model")
    if refused:
        raise UserError(f"{refused}.")
    per_step = measure.max_seconds + settings.CONFIG_TIMEOUT_S.get()
    outcome = call_in_child(
        "backend.engine.mixed:search_in_child",
        str(source),
        bound,
        to_json(measure),
        base.to_dict(),
        timeout_s=(MAX_STEPS + 2) * per_step,
        what="The mixed-precision search",
        sandboxed=True,
        binds=sandbox.Binds.of(read_only=[Path(source).resolve().parent]),
        limits=ChildLimits.from_settings(gpu=base.provider != "cpu"),
    )
    return SearchReport.from_child(outcome.value_or_raise("The mixed-precision search"))


def main(argv: list[str] | None = None) -> int:
    """`python -m backend.engine.mixedcli MODEL --bound cosine=0.99`: the search, printed."""
    prog = "python -m backend.engine.mixedcli"
    parser = argparse.ArgumentParser(prog=prog, description=mixed.__doc__)
    add_arguments(parser)
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
