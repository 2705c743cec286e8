"""Plain-text tables for the terminal: the CLI prints these, pages never do."""

from __future__ import annotations

from typing import Any

from backend import pricing
from backend.measure_settings import PEAK_SCOPE
from backend.reporting import distance
from backend.reporting.metrics import REGISTRY as METRICS
from backend.reporting.metrics import pick
from backend.reporting.provenance import hardware, ran_on, software, what_ran
from backend.results import ConfigurationResult
from backend.specs import Configuration


def table(rows: list[list[Any]], headers: list[str]) -> str:
    """Left-aligned columns under a dashed rule."""
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# The results table's figures in column order; headers and formats are the registry's.
RESULT_METRICS = pick(
    "p50_ms",
    "p99_ms",
    "throughput",
    "cost_per_million",
    "peak_rss_mb",
    "j_per_sample",
    "idle_w",
    "cosine_similarity",
    "top1_agreement",
)
RESULT_HEADERS = ["configuration", "status", *(m.cli_header for m in RESULT_METRICS), "error"]
EVAL_TOP1 = METRICS["eval_top1_accuracy"]  # its own column, only when a job has labelled data
TOP1_NOTE = (
    f"{METRICS['top1_agreement'].cli_header}: share of rows whose top class is FP32's on the same "
    "inputs (agreement, not accuracy)."
)
EVAL_NOTE = f"{EVAL_TOP1.cli_header}: top-1 accuracy against the evaluation set's labels."


def _scored(results: list[ConfigurationResult]) -> bool:
    """True when a result was scored against an evaluation set's labels (its accuracy column)."""
    return any(r.evaluation is not None and r.evaluation.labelled for r in results)


def _cost(r: ConfigurationResult, prices: pricing.Prices) -> float | None:
    """Dollars per million inferences of an ok result (failed and wrong outputs: none)."""
    price = pricing.price_for(prices, r.configuration.provider, r.configuration.target)
    return pricing.cost_per_million(price.per_hour if price and r.ok else None, r.throughput)


def _unpriced(results: list[ConfigurationResult], prices: pricing.Prices) -> str:
    """Which measured targets the table has no price for (`--price gpu=1` left cpu's column
    empty without a word)."""

    def unpriced(config: Configuration) -> bool:
        return pricing.price_for(prices, config.provider, config.target) is None

    confs = [r.configuration for r in results if r.ok]
    said = pricing.unpriced_sentence(c.target or c.provider for c in confs if unpriced(c))
    return f" {said}" if said else ""


def results_table(results: list[ConfigurationResult], prices: pricing.Prices = ()) -> str:
    """One line per configuration; the RSS column's scope and the prices are said under it."""
    prices = pricing.or_default(prices)
    scored = _scored(results)
    rows = []
    for r in results:
        lat, acc, energy = r.latency, r.accuracy, r.energy
        measured = energy is not None and energy.measured
        values = [
            lat.p50 if lat else None,
            lat.p99 if lat else None,
            r.throughput,
            _cost(r, prices),
            r.peak_rss_mb,
            energy.j_p50 if energy and measured else None,
            energy.idle_w if energy and measured else None,
            acc.cosine_similarity if acc else None,
            acc.top1_agreement if acc else None,
        ]
        evaluated = r.evaluation.top1_accuracy if r.evaluation else None
        rows.append(
            [
                r.config_key,
                r.status.value,
                *(m.text(v) for m, v in zip(RESULT_METRICS, values, strict=True)),
                *([EVAL_TOP1.text(evaluated)] if scored else []),
                (r.error or "").splitlines()[-1][:80] if r.error else "",
            ]
        )
    scopes = {r.peak_rss_scope for r in results if r.peak_rss_mb is not None}
    scope = ", ".join(sorted(s or "whole process (older result)" for s in scopes)) or PEAK_SCOPE
    rss, money = METRICS["peak_rss_mb"].cli_header, METRICS["cost_per_million"].cli_header
    headers = RESULT_HEADERS[:-1] + [EVAL_TOP1.cli_header] * scored + RESULT_HEADERS[-1:]
    text = (
        table(rows, headers)
        + f"\n{rss}: peak resident memory over {scope}."
        + f"\n{money}: dollars per million inferences = price per hour / (samples/s x 3600) x 1e6"
        + f" at {pricing.prices_text(prices)} (set by --price or OPTIBOARD_PRICE_PER_HOUR)."
        + _unpriced(results, prices)
        + f"\n{TOP1_NOTE}"
        + (f"\n{EVAL_NOTE}" if scored else "")
    )
    return "\n".join([text, *ran_lines(results), *energy_lines(results)])


def ran_lines(results: list[ConfigurationResult]) -> list[str]:
    """Under the table: what ran the numbers (runtime and version, hardware, host), each once."""
    setups = (
        (
            software(r.environment),
            hardware(r.environment, r.configuration.provider),
            ran_on(r.environment),
        )
        for r in results
    )
    return [f"ran: {line}" for line in what_ran(setups)]


def energy_lines(results: list[ConfigurationResult]) -> list[str]:
    """Under the table: what measured the energy columns, or why they are empty; the spread
    of each measured configuration's windows."""
    header = METRICS["j_per_sample"].cli_header
    sources = sorted({r.energy.source for r in results if r.energy is not None})
    lines = [f"{header}, idle W: {source}" for source in sources]
    for r in results:
        if r.energy is not None and r.energy.measured:
            lines.append(f"  {r.config_key}: {r.energy.summary}")
    return lines


def why_lines(results: list[ConfigurationResult]) -> list[str]:
    return [f"  {r.config_key}: {note}" for r in results for note in r.notes]


GPU_METRICS = pick("copy_share", "tflops", "peak_fraction", "gpu_memory_mb")
GPU_HEADERS = ["configuration", "timing", *(m.cli_header for m in GPU_METRICS)]


def gpu_table(results: list[ConfigurationResult]) -> str:
    """GPU results only: what the timing includes, the copy share, FLOP/s and distance to peak;
    '' when no result ran on a GPU provider. The MLPerf line follows for ResNet-50-like models."""
    shares = distance.copy_shares(results)
    rows, best = [], None
    for r in results:
        found = distance.distance(r) if r.ok else None
        if found is None:
            continue
        config = r.configuration
        share = shares.get(distance.io_pair_key(config))
        copy, tflops, peak, memory = GPU_METRICS
        fraction = peak.text(found.fraction)
        rows.append(
            [
                r.config_key,
                config.io_mode.label,
                copy.text(share),
                tflops.text(found.achieved_flops / 1e12),
                fraction if found.fraction is None else f"{fraction} ({found.precision.upper()})",
                memory.text(r.gpu_memory_mb),
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
