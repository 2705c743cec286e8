"""A stored generation job in the terminal: `optiboard show` prints its points as `optiboard
generate` prints a run (the table, then what ran, the peak and what each share of it is), and
`optiboard export` writes them: CSV is the Compare page's frame (points.generation_frame), JSON
every point as the worker stored it. Sweep exports read another table (results), so a mixed
export is refused in one sentence (backend/cli_reports.py, for serving studies too)."""

from __future__ import annotations

import json

import pandas as pd

from backend import pricing
from backend.errors import UserError
from backend.generate.cli_verbs import HEADERS, roofline_notes
from backend.generate.dramshare import of_peak
from backend.generate.perplexity import split_note
from backend.generate.points import generation_frame
from backend.generate.results import MEASURED, without_figures
from backend.reporting import exports
from backend.reporting.metrics import cell
from backend.reporting.provenance import ran_line
from backend.reporting.text import table
from storage.repo import serving as point_store

SHOW_HEADERS = ["variant", *HEADERS[:-1], "status"]


def _points(job_ids: list[int]) -> list[point_store.ServingPointRow]:
    return point_store.list_points(job_ids, kind=point_store.GENERATION)


def _row(point: pd.Series) -> list[str]:
    agreement, new = point["greedy_agreement"], int(point["new_tokens"])
    agreed = "-" if pd.isna(agreement) else f"{round(agreement * new)}/{new}"
    in_cache = point["bandwidth_in_cache"] in (True,)  # None or NaN where not recorded
    roof = {"fraction": point["bandwidth_fraction"], "in_cache": in_cache}
    stable = "stable" if point["stable"] else "unstable"
    return [
        str(point["variant"]),
        str(point["runtime"]),
        str(point["precision"]),
        str(point["prompt_tokens"]),
        str(new),
        str(point["sequences"]),
        f"{cell(point['ttft_p50_ms'], '.2f')}/{cell(point['ttft_p99_ms'], '.2f')}",
        f"{cell(point['itl_p50_ms'], '.3f')}/{cell(point['itl_p99_ms'], '.3f')}",
        cell(point["output_tokens_per_s"], ".1f"),
        cell(point["decode_tokens_per_s"], ".1f"),
        cell(point["e2e_p50_ms"], ".1f"),
        cell(point["weights_mb"], ".1f"),
        cell(point["kv_cache_mb"], ".2f"),
        cell(point["peak_rss_mb"], ".0f"),
        cell(point["bandwidth_gb_s"], ".2f"),
        of_peak(roof) if in_cache or not pd.isna(point["bandwidth_fraction"]) else "-",
        agreed,
        cell(point["perplexity"], ".3f"),
        cell(point["j_per_token"], ".4g"),
        f"{point['status']}, {stable}",
    ]


def _explained(points: list[point_store.ServingPointRow]) -> list[str]:
    """The peak each share is of, what ran each variant x runtime, which shares are not DRAM
    figures, perplexity, verdicts and every point that did not run."""
    lines = [
        f"peak bandwidth: {source}"
        for source in dict.fromkeys(
            (p.payload.get("peak_bandwidth") or {}).get("source", "") for p in points
        )
        if source
    ]
    ran: dict[str, str] = {}
    scored: dict[str, str] = {}
    for p in points:
        load = p.payload
        name = f"{load.get('variant_label') or load.get('variant')} (model {load.get('model_id')})"
        if load.get("status") in MEASURED:
            ran.setdefault(
                f"{name} {load['runtime']}",
                ran_line(load["runtime"], load["facts"], load.get("environment")),
            )
        if ppl := load.get("perplexity"):
            scored[f"{name} {load['runtime']}"] = (
                f"perplexity {ppl['perplexity']:.3f} on {ppl['tokens']} of {ppl['text_tokens']} "
                f"tokens of {load.get('perplexity_text') or 'the text'} (windows of "
                f"{ppl['window']}, {ppl['chunk']} tokens per step through the KV cache)"
            )
    lines += [f"{name.rsplit(' ', 1)[0]} · {line}" for name, line in ran.items()]
    lines += [f"{name}: {line}" for name, line in scored.items()]
    lines += roofline_notes(
        [
            (p.point_key, p.payload.get("roofline") or {})
            for p in points
            if p.payload["status"] in MEASURED
        ]
    )
    for p in points:
        if p.payload.get("verdict"):
            lines.append(f"{p.point_key}: {p.payload['status']}, {p.payload['verdict']}")
        elif p.payload.get("status") not in MEASURED:
            lines.append(f"{p.point_key} {p.payload.get('status')}: {p.payload.get('error')}")
    sources = {(p.payload.get("energy") or {}).get("source") for p in points}
    lines += [f"J/token: {source}" for source in sorted(s for s in sources if s)]
    splits = (
        split_note(
            p.point_key,
            p.payload.get("agreement") or [],
            p.payload.get("new_tokens", 0),  # a failed point stores none
            p.payload.get("split_margins", []),
        )
        for p in points
    )
    lines += [line for line in splits if line]
    notes = [n for p in points for n in p.payload.get("notes", [])]
    return lines + list(dict.fromkeys(notes))


def show_lines(job_id: int, prices: pricing.Prices = ()) -> list[str]:
    """The job's measured points as a table and the lines that say what they are; one line
    when nothing was stored yet."""
    points = _points([job_id])
    if not points:
        return ["no generation point stored yet"]
    frame = generation_frame([job_id], prices)
    measured = frame[frame["status"].isin(MEASURED)]
    lines = [table([_row(point) for _, point in measured.iterrows()], SHOW_HEADERS)]
    costs = measured.dropna(subset=["cost_per_million_tokens"])
    lines += [
        f"{point['key']}: ${point['cost_per_million_tokens']:.4g} per million output tokens "
        f"at ${point['price_per_hour']:g}/hour"
        for _, point in costs.iterrows()
    ]
    return lines + _explained(points)


def export_generation(
    job_ids: list[int], fmt: str, prices: pricing.Prices = ()
) -> tuple[bytes, int]:
    """(the file's bytes, how many points): CSV the Compare frame, JSON every stored point (one
    that did not run with no figures, though stored with 0.0 before 2026-12-08)."""
    frame = generation_frame(job_ids, prices)
    if frame.empty:
        raise UserError(f"Jobs {', '.join(map(str, job_ids))} have no results to export yet.")
    if fmt == "csv":
        return exports.export_csv(frame), len(frame)
    records = [
        {"job_id": p.job_id, "point_id": p.id, "key": p.point_key, **without_figures(p.payload)}
        for p in _points(job_ids)
    ]
    return json.dumps(records, indent=2, default=str).encode(), len(records)
