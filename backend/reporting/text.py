"""Plain-text tables for the terminal: the CLI prints these, pages never do."""

from __future__ import annotations

from typing import Any

from backend.engine.measure import PEAK_SCOPE
from backend.reporting import distance
from backend.results import ConfigurationResult
from backend.specs import Configuration


def table(rows: list[list[Any]], headers: list[str]) -> str:
    """Left-aligned columns under a dashed rule."""
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


RESULT_HEADERS = [
    "configuration",
    "status",
    "p50 ms",
    "p99 ms",
    "samples/s",
    "RSS MB",
    "cosine",
    "top-1",
    "error",
]


def results_table(results: list[ConfigurationResult]) -> str:
    """One line per configuration; the RSS column's scope is said under the table."""
    rows = []
    for r in results:
        lat, acc = r.latency, r.accuracy
        rows.append(
            [
                r.config_key,
                r.status.value,
                fmt(lat.p50 if lat else None),
                fmt(lat.p99 if lat else None),
                fmt(r.throughput, 1),
                fmt(r.peak_rss_mb, 0),
                fmt(acc.cosine_similarity if acc else None, 5),
                "-" if not acc or acc.top1_agreement is None else f"{acc.top1_agreement:.1%}",
                (r.error or "").splitlines()[-1][:80] if r.error else "",
            ]
        )
    scopes = {r.peak_rss_scope for r in results if r.peak_rss_mb is not None}
    scope = ", ".join(sorted(s or "whole process (older result)" for s in scopes)) or PEAK_SCOPE
    return table(rows, RESULT_HEADERS) + f"\nRSS MB: peak resident memory over {scope}."


def why_lines(results: list[ConfigurationResult]) -> list[str]:
    return [f"  {r.config_key}: {note}" for r in results for note in r.notes]


GPU_HEADERS = ["configuration", "timing", "copy share", "TFLOP/s", "of peak", "GPU MB"]


def gpu_table(results: list[ConfigurationResult]) -> str:
    """GPU results only: what the timing includes, the copy share, FLOP/s and distance to peak;
    '' when no result ran on a GPU provider. The MLPerf line follows for ResNet-50-like models."""
    shares = distance.copy_shares(results)
    rows, best = [], None
    for r in results:
        found = distance.distance(r) if r.ok else None
        if found is None:
            continue
        config = Configuration.from_dict(r.configuration)
        share = shares.get(distance.io_pair_key(config))
        fraction = found.fraction
        rows.append(
            [
                r.config_key,
                config.io_mode.label,
                "-" if share is None else f"{share:.0%}",
                f"{found.achieved_flops / 1e12:.2f}",
                "-" if fraction is None else f"{fraction:.1%} ({found.precision.upper()})",
                fmt(r.gpu_memory_mb, 0),
            ]
        )
        if best is None or (r.throughput or 0) > (best.throughput or 0):
            best = r
    if not rows:
        return ""
    text = table(rows, GPU_HEADERS)
    text += "\ncopy share: (end-to-end p50 - device-resident p50) / end-to-end p50."
    reference = distance.mlperf_line(best) if best is not None else None
    return text + (f"\n{reference}" if reference else "")
