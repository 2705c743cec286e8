"""A regression check's stored results read back as one row per configuration (CLI and pages).

Each configuration's two sides are ordinary stored results (backend/jobs/regressspec.py keys
them 'a:ENV:KEY' and 'b:ENV:KEY'); B's carries the comparison the job made. The interval is
recomputed here from both sides' stored raw samples with the stored seed and resamples, so what
is shown is what the samples say (and equals what the job logged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backend.jobs.regressspec import RegressionSpec, split_key
from backend.reporting import regression as stats
from backend.reporting.text import table
from backend.results import StoredResult
from storage.repo import results as result_store


@dataclass
class PairRow:
    """One configuration of a regression check: both sides and the verdict."""

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


def pair_rows(spec: RegressionSpec, stored: list[StoredResult]) -> list[PairRow]:
    """Rows in the order the configurations were stored; a failed side says why."""
    sides: dict[str, dict[str, StoredResult]] = {}
    for result in stored:
        parts = split_key(result.config_key)
        if parts:
            sides.setdefault(parts[2], {})[parts[0]] = result
    samples = result_store.result_samples([s.id for pair in sides.values() for s in pair.values()])
    rows = []
    for key, pair in sides.items():
        a, b = pair.get("a"), pair.get("b")
        if a is None or b is None or not (a.ok and b.ok):
            why = next((s.error for s in (a, b) if s is not None and s.error), "not measured yet")
            rows.append(
                PairRow(key, spec.env_a, spec.env_b, "", "", "failed", why or "", None, error=why)
            )
            continue
        report = b.result.environment.get("regression", {})
        interval = stats.bootstrap_ratio(
            samples.get(a.id) or a.result.samples_ms,
            samples.get(b.id) or b.result.samples_ms,
            spec.resamples,
            spec.confidence,
            spec.seed,
        )
        verdict = stats.verdict(interval, spec.min_change)
        versus = report.get("accuracy_vs_a") or {}
        diff = report.get("profile_diff") or {}
        rows.append(
            PairRow(
                configuration=key,
                env_a=spec.env_a,
                env_b=spec.env_b,
                version_a=str(a.result.environment.get("backend_version", "?")),
                version_b=str(b.result.environment.get("backend_version", "?")),
                verdict=verdict,
                line=stats.verdict_line(interval, verdict, spec.env_a, spec.env_b),
                interval=interval,
                cosine=versus.get("cosine_similarity"),
                max_abs=versus.get("max_abs_error"),
                diff_lines=list(diff.get("lines") or []),
                diff=diff,
            )
        )
    return rows


def text_report(spec: RegressionSpec, rows: list[PairRow]) -> str:
    """The table, then for each slower configuration the ops whose time changed most."""
    body = []
    for r in rows:
        iv = r.interval
        body.append(
            [
                r.configuration,
                f"{r.env_a} {r.version_a}",
                f"{r.env_b} {r.version_b}",
                f"{iv.median_a_ms:.4g}" if iv else "-",
                f"{iv.median_b_ms:.4g}" if iv else "-",
                f"{iv.ratio:.3f}" if iv else "-",
                f"[{iv.low:.3f}, {iv.high:.3f}]" if iv else "-",
                r.verdict,
                f"{r.cosine:.6f}" if r.cosine is not None else "-",
                f"{r.max_abs:.3g}" if r.max_abs is not None else "-",
            ]
        )
    headers = ["configuration", "A", "B", "A p50 ms", "B p50 ms", "B/A", "interval"]
    headers += ["verdict", "cosine B~A", "max abs B-A"]
    lines = [table(body, headers), ""]
    lines.append(
        f"{spec.confidence:.0%} bootstrap interval of median(B)/median(A), {spec.resamples:,} "
        f"resamples (seed {spec.seed}); slower/faster needs the whole interval past 1 and a "
        f"change of at least {spec.min_change:.0%}."
    )
    for r in rows:
        if r.error:
            lines.append(f"{r.configuration}: failed: {r.error}")
        elif r.verdict == stats.SLOWER and r.diff_lines:
            lines.append(f"{r.configuration}: slower; ops whose time changed most (A -> B):")
            lines += [f"  {line}" for line in r.diff_lines]
    return "\n".join(lines)
