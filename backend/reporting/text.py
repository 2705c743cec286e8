"""Plain-text tables for the terminal: the CLI prints these, pages never do."""

from __future__ import annotations

import textwrap
from typing import Any

from backend import pricing
from backend.counts import counted
from backend.measure_settings import PEAK_SCOPE
from backend.reporting import distance
from backend.reporting.metrics import REGISTRY as METRICS
from backend.reporting.metrics import pick
from backend.reporting.provenance import hardware, ran_on, software, what_ran
from backend.results import ConfigurationResult, ResultStatus
from backend.specs import Configuration


def table(rows: list[list[Any]], headers: list[str]) -> str:
    """Left-aligned columns under a dashed rule."""
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


NOTE_WIDTH = 100  # where a footnote's text wraps; a word longer than that (a path) stays whole


def last_line(text: str | None) -> str:
    """The line of an error that says what went wrong (a traceback's last), '' for none."""
    return ((text or "").strip().splitlines() or [""])[-1]


def footnoted(texts: list[str], title: str = "errors") -> tuple[list[str], list[str]]:
    """Long texts (errors) kept out of a table's column, which they padded to hundreds of
    characters or were cut mid-word in: each row's mark ("[1]", "" for none) and, under the
    table, each distinct text once, in full, wrapped without breaking a word or a path."""
    numbers: dict[str, int] = {}
    for text in texts:
        if text and text not in numbers:
            numbers[text] = len(numbers) + 1
    marks = [f"[{numbers[t]}]" if t else "" for t in texts]
    lines = [f"{title}:"] if numbers else []
    for text, number in numbers.items():
        lead = f"  [{number}] "
        wrap = textwrap.TextWrapper(
            NOTE_WIDTH, initial_indent=lead, subsequent_indent=" " * len(lead),
            break_long_words=False, break_on_hyphens=False,
        )  # fmt: skip
        lines.append(wrap.fill(text))
    return marks, lines


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
RESULT_HEADERS = [
    "configuration",
    "status",
    "stable",
    *(m.cli_header for m in RESULT_METRICS),
    "error",
]
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


def no_cost_line(unpriced: list[tuple[str, bool]]) -> str:
    """Why the cost column shows '-', said once under the table instead of leaving a blank to
    be guessed at: `unpriced` holds (status, has a price) of each row without a cost. A row
    measured without a price is left to the "No price for" sentence."""
    ok, wrong = ResultStatus.OK.value, ResultStatus.WRONG_OUTPUTS.value
    not_run = [status for status, _ in unpriced if status not in (ok, wrong)]
    parts = []
    if not_run:
        kinds = ", ".join(f"{not_run.count(k)} {k}" for k in dict.fromkeys(not_run))
        parts.append(f"{counted(len(not_run), 'configuration')} did not run ({kinds})")
    if wrongs := sum(status == wrong for status, _ in unpriced):
        parts.append(f"{wrongs} computed wrong outputs, which are never priced")
    if rateless := sum(status == ok and priced for status, priced in unpriced):
        parts.append(f"{rateless} measured no throughput to price")
    money = METRICS["cost_per_million"].cli_header
    return f"{money} is - where there is no cost: {'; '.join(parts)}." if parts else ""


def _costless(results: list[ConfigurationResult], prices: pricing.Prices) -> list[tuple[str, bool]]:
    """(status, has a price) of each result the table prints no cost for."""
    return [
        (
            r.status.value,
            pricing.price_for(prices, r.configuration.provider, r.configuration.target) is not None,
        )
        for r in results
        if _cost(r, prices) is None
    ]


def _said(sentence: str) -> str:
    return f"\n{sentence}" if sentence else ""


def _stable_text(stable: bool | None) -> str:
    """The stability verdict as `compare` prints it: a row measured unstable reads "ok" in the
    status column, so the verdict needs a column of its own."""
    return "-" if stable is None else ("yes" if stable else "no")


def _drop_empty(rows: list[list[str]], headers: list[str], keep: int) -> tuple[list, list, list]:
    """Rows and headers without the columns past the first `keep` that are empty ('-' or '') in
    every row, and the names of those left out (said once under the table, as Compare does)."""
    empty = [i >= keep and all(row[i] in ("-", "") for row in rows) for i in range(len(headers))]
    kept = [i for i, gone in enumerate(empty) if not gone]
    dropped = [h for h, gone in zip(headers, empty, strict=True) if gone and h != "error"]
    return [[row[i] for i in kept] for row in rows], [headers[i] for i in kept], dropped


def results_table(results: list[ConfigurationResult], prices: pricing.Prices = ()) -> str:
    """One line per configuration; the RSS column's scope and the prices are said under it.
    Columns empty in every row are left out and named."""
    prices = pricing.or_default(prices)
    scored = _scored(results)
    marks, errors = footnoted([last_line(r.error) for r in results])
    rows = []
    for r, mark in zip(results, marks, strict=True):
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
                _stable_text(r.stable),
                *(m.text(v) for m, v in zip(RESULT_METRICS, values, strict=True)),
                *([EVAL_TOP1.text(evaluated)] if scored else []),
                mark,
            ]
        )
    scopes = {r.peak_rss_scope for r in results if r.peak_rss_mb is not None}
    scope = ", ".join(sorted(s or "whole process (older result)" for s in scopes)) or PEAK_SCOPE
    rss, money = METRICS["peak_rss_mb"].cli_header, METRICS["cost_per_million"].cli_header
    headers = RESULT_HEADERS[:-1] + [EVAL_TOP1.cli_header] * scored + RESULT_HEADERS[-1:]
    rows, headers, dropped = _drop_empty(rows, headers, keep=3)
    top1 = METRICS["top1_agreement"].cli_header
    text = (
        "\n".join([table(rows, headers), *errors])
        + (f"\nNot shown, empty in every row: {', '.join(dropped)}." if dropped else "")
        + (f"\n{rss}: peak resident memory over {scope}." if rss in headers else "")
        + f"\n{money}: dollars per million inferences = price per hour / (samples/s x 3600) x 1e6"
        + f" at {pricing.prices_text(prices)} (set by --price or OPTIBOARD_PRICE_PER_HOUR)."
        + _unpriced(results, prices)
        + _said(no_cost_line(_costless(results, prices)))
        + (f"\n{TOP1_NOTE}" if top1 in headers else "")
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
