"""A regression check's stored results read back as one row per model and configuration (CLI
and pages), and the check's summary: each model's verdict in one line, then an overall line.

Each configuration's two sides are ordinary stored results (backend/jobs/regressspec.py keys
them 'a:ENV:KEY' and 'b:ENV:KEY', or 'a:ENV:mID:KEY' in a check of several models); B's carries
the comparison the job made. The interval is recomputed here from both sides' stored raw
samples, cut back into their processes by each side's stored counts (process_samples; none: a
check stored before processes, one process a side), with the stored seed and resamples, so what
is shown is what the samples say (and equals what the job logged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.jobs.regressspec import RegressionSpec, split_key
from backend.reporting import regression as stats
from backend.reporting.text import table
from backend.results import StoredResult
from storage.repo import models as model_store
from storage.repo import results as result_store

FAILED = "failed"


@dataclass
class PairRow:
    """One configuration of one model in a regression check: both sides and the verdict."""

    configuration: str
    env_a: str
    env_b: str
    version_a: str
    version_b: str
    verdict: str
    line: str
    interval: stats.RatioInterval | None
    cosine: float | None = None
    max_abs: float | None = None
    diff_lines: list[str] = field(default_factory=list)
    diff: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    model_id: int = 0
    model: str = ""  # 'model 3 (cnn.onnx)'
    loaded_a: str = ""  # the runtime package's folder A's child imported ('' if not stored)
    loaded_b: str = ""

    @property
    def judged(self) -> bool:
        """Whether the interval means anything: measured, with enough samples on each side."""
        return self.interval is not None and self.verdict != stats.TOO_FEW


def model_name(model_id: int) -> str:
    """'model 3 (cnn.onnx)', or 'model 3' for one no longer in the library."""
    row = model_store.get_model(model_id)
    return f"model {model_id} ({row.name})" if row else f"model {model_id}"


def pair_rows(spec: RegressionSpec, stored: list[StoredResult], job_model: int) -> list[PairRow]:
    """Rows by model in the check's order, then in the order the configurations were stored; a
    failed side says why. job_model: the job's model, the one model of a one-model check."""
    sides: dict[tuple[int, str], dict[str, StoredResult]] = {}
    for result in stored:
        parts = split_key(result.config_key)
        if parts:
            model = parts.model if parts.model is not None else job_model
            sides.setdefault((model, parts.config), {})[parts.side] = result
    order = {m: i for i, m in enumerate(spec.model_ids(job_model))}
    names = {m: model_name(m) for m in {*order, *(model for model, _ in sides)}}
    samples = result_store.result_samples([s.id for pair in sides.values() for s in pair.values()])
    rows = []
    for model, key in sorted(sides, key=lambda mk: order.get(mk[0], len(order))):
        a, b = sides[model, key].get("a"), sides[model, key].get("b")
        if a is None or b is None or not (a.ok and b.ok):
            why = next((s.error for s in (a, b) if s is not None and s.error), "not measured yet")
            rows.append(
                PairRow(key, spec.env_a, spec.env_b, "", "", FAILED, why or "", None, error=why)
            )
        else:
            rows.append(_measured(spec, key, a, b, samples))
        rows[-1].model_id, rows[-1].model = model, names[model]
    return rows


def _measured(
    spec: RegressionSpec,
    key: str,
    a: StoredResult,
    b: StoredResult,
    samples: dict[int, list[float]],
) -> PairRow:
    """Both sides measured: the interval recomputed from their own stored samples, process by
    process."""
    report = b.result.environment.get("regression", {})
    runs = {
        side.id: stats.by_process(
            samples.get(side.id) or side.result.samples_ms,
            side.result.environment.get("process_samples"),
        )
        for side in (a, b)
    }
    interval = stats.process_ratio(
        runs[a.id], runs[b.id], spec.resamples, spec.confidence, spec.seed, spec.processes
    )
    verdict = stats.verdict(interval, spec.min_change)
    versus = report.get("accuracy_vs_a") or {}
    diff = report.get("profile_diff") or {}
    return PairRow(
        configuration=key,
        env_a=spec.env_a,
        env_b=spec.env_b,
        version_a=str(a.result.environment.get("backend_version", "?")),
        version_b=str(b.result.environment.get("backend_version", "?")),
        verdict=verdict,
        line=stats.verdict_line(interval, verdict, spec.env_a, spec.env_b, spec.min_change),
        interval=interval,
        cosine=versus.get("cosine_similarity"),
        max_abs=versus.get("max_abs_error"),
        diff_lines=list(diff.get("lines") or []),
        diff=diff,
        loaded_a=_loaded(a),
        loaded_b=_loaded(b),
    )


def _loaded(side: StoredResult) -> str:
    """The runtime package's folder the side's child imported, from the module file it stored
    (empty for results stored without one)."""
    module = str(side.result.environment.get("runtime_file") or "")
    return str(Path(module).parent) if module else ""


def loaded_lines(spec: RegressionSpec, rows: list[PairRow]) -> list[str]:
    """Once per side and folder: 'A (default): onnxruntime 1.32.0 from /path/onnxruntime', so
    two environments with the same version still show which files each one ran."""
    lines: list[str] = []
    for r in rows:
        for side, env, version, folder in (
            ("A", r.env_a, r.version_a, r.loaded_a),
            ("B", r.env_b, r.version_b, r.loaded_b),
        ):
            line = f"{side} ({env}): {spec.runtime} {version} from {folder}"
            if folder and line not in lines:
                lines.append(line)
    return lines


# A model's verdict over its configurations: the first of these that any configuration has;
# a model is the same only where every configuration was measured enough and judged the same.
UNLESS_SAME = (stats.SLOWER, stats.FASTER, FAILED, stats.UNCLEAR, stats.TOO_FEW)


def _said(r: PairRow, min_change: float) -> str:
    """'slower, B/A 1.342 [1.201, 1.450]', 'failed: why', or why there is no verdict; unclear
    says why and what to do."""
    iv = r.interval
    if r.error or iv is None:
        return f"{FAILED}: {r.error}"
    if r.verdict == stats.TOO_FEW:
        return stats.too_few_sentence(iv)
    said = f"{r.verdict}, B/A {iv.ratio:.3f} [{iv.low:.3f}, {iv.high:.3f}]"
    return said + (f": {stats.unclear_said(min_change)}" if r.verdict == stats.UNCLEAR else "")


def model_verdict(rows: list[PairRow]) -> str:
    """One model's verdict over its configurations: slower where any is, else faster where
    any is, else failed where any failed, else unclear where any interval reached past the
    smallest change, else too few samples where any had too few, else same."""
    said = {r.verdict for r in rows}
    return next((v for v in UNLESS_SAME if v in said), stats.SAME)


def summary_lines(spec: RegressionSpec, rows: list[PairRow], job_model: int) -> list[str]:
    """Each model's verdict in one line (its configurations' intervals), then, for several
    models, the overall line: 'slower on 1 of 3 models: model 3 (lm.onnx)'. A model without
    a stored pair yet says 'not measured yet'."""
    models = spec.model_ids(job_model)
    by_model: dict[int, list[PairRow]] = {m: [] for m in models}
    for r in rows:
        by_model.setdefault(r.model_id, []).append(r)
    lines, verdicts = [], {}
    for model, own in by_model.items():
        name = own[0].model if own else model_name(model)
        if not own:
            lines.append(f"{name}: not measured yet")
            continue
        verdicts[name] = model_verdict(own)
        if len(own) == 1:
            lines.append(f"{name}: {_said(own[0], spec.min_change)}")
        else:
            said = (f"{r.configuration} {_said(r, spec.min_change)}" for r in own)
            lines.append(f"{name}: " + "; ".join(said))
    if len(by_model) > 1:
        lines.append(overall_line(verdicts, len(by_model)))
    return lines


def overall_line(verdicts: dict[str, str], total: int) -> str:
    """'slower on 1 of 3 models: NAME; the same on 2', from each model's verdict."""
    named = {
        v: [name for name, said in verdicts.items() if said == v]
        for v in (*UNLESS_SAME, stats.SAME)
    }
    if len(named[stats.SAME]) == total:
        return f"the same on all {total} models"
    parts = []
    for verdict in UNLESS_SAME:
        if named[verdict]:
            of = f" of {total} models" if not parts else ""
            parts.append(f"{verdict} on {len(named[verdict])}{of}: {', '.join(named[verdict])}")
    if named[stats.SAME]:
        parts.append(f"the same on {len(named[stats.SAME])}")
    pending = total - len(verdicts)
    if pending:
        parts.append(f"{pending} not measured yet")
    return "; ".join(parts) if parts else f"none of {total} models measured yet"


def ratio_said(spec: RegressionSpec) -> str:
    """What B/A is: of one process a side, or the median of the pairs' ratios."""
    if spec.processes == 1:
        return "median(B)/median(A)"
    return "B/A, the median over pairs of median(B_k)/median(A_k)"


def rule_said(spec: RegressionSpec) -> str:
    """How the interval was drawn and what each verdict needs: the CLI's footnote and the
    Regression page's caption say the same."""
    change = f"{spec.min_change:.0%}"
    return (
        f"{method_said(spec)}; slower or faster needs the whole interval past 1 and a change of "
        f"at least {change}, same the whole interval within {change} of 1 (else unclear), and "
        f"{needs_said(spec)}"
    )


def method_said(spec: RegressionSpec) -> str:
    """How the interval was drawn: over processes and calls, or over calls of one process."""
    if spec.processes == 1:
        return "one process a side, calls resampled (an offset between processes unseen)"
    return (
        f"{spec.processes} processes a side: each resample draws A B pairs of processes, then "
        "each one's calls, so an offset between processes widens it"
    )


def needs_said(spec: RegressionSpec) -> str:
    """What a side needs for a verdict: 'each side at least 6 samples (fewer: ...)'."""
    need = stats.min_samples(spec.confidence)
    if spec.processes == 1:
        return f"each side at least {need} samples (fewer: {stats.TOO_FEW}, no verdict)"
    return (
        f"each side at least {need} samples in each process and "
        f"{stats.processes_needed(spec.processes)} "
        f"processes (fewer: {stats.TOO_FEW}, no verdict)"
    )


def text_report(spec: RegressionSpec, rows: list[PairRow], job_model: int) -> str:
    """The summary, the table (with a model column for several models), then for each slower
    configuration the ops whose time changed most."""
    several = len(spec.model_ids(job_model)) > 1
    body = []
    for r in rows:
        iv = r.interval
        body.append(
            ([r.model] if several else [])
            + [
                r.configuration,
                f"{r.env_a} {r.version_a}",
                f"{r.env_b} {r.version_b}",
                f"{iv.median_a_ms:.4g}" if iv else "-",
                f"{iv.median_b_ms:.4g}" if iv else "-",
                f"{iv.ratio:.3f}" if iv else "-",
                f"[{iv.low:.3f}, {iv.high:.3f}]" if iv and r.judged else "-",
                f"{iv.samples_a}/{iv.samples_b}" if iv else "-",
                r.verdict,
                f"{r.cosine:.6f}" if r.cosine is not None else "-",
                f"{r.max_abs:.3g}" if r.max_abs is not None else "-",
            ]
        )
    headers = (["model"] if several else []) + ["configuration", "A", "B", "A p50 ms", "B p50 ms"]
    headers += ["B/A", "interval", "samples A/B", "verdict", "cosine B~A", "max abs B-A"]
    lines = summary_lines(spec, rows, job_model) + ["", table(body, headers), ""]
    lines += loaded_lines(spec, rows)
    lines.append(
        f"{spec.confidence:.0%} bootstrap interval of {ratio_said(spec)}, {spec.resamples:,} "
        f"resamples (seed {spec.seed}); {rule_said(spec)}."
    )
    for r in rows:
        which = f"{r.model} {r.configuration}" if several else r.configuration
        if r.interval is not None and not r.error:
            lines.append(f"{which}: {stats.processes_said(r.interval)}")
    for r in rows:
        which = f"{r.model} {r.configuration}" if several else r.configuration
        if r.error:
            lines.append(f"{which}: failed: {r.error}")
        elif r.verdict == stats.SLOWER and r.diff_lines:
            lines.append(f"{which}: slower; ops whose time changed most (A -> B):")
            lines += [f"  {line}" for line in r.diff_lines]
    return "\n".join(lines)
