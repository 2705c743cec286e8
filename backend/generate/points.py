"""Generation jobs' stored points as one frame, and the Compare page's four charts of them:
TTFT and ITL against concurrent sequences, tokens/s against memory (weights + KV cache), and
perplexity against speed with its Pareto front. No Streamlit here (pages/components draws)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from backend import pricing
from backend.generate import dramshare
from backend.generate.dramshare import dram_share, held_in
from backend.generate.jobspec import GenerationJobSpec
from backend.generate.perplexity import split_note
from backend.generate.results import MEASURED, without_figures
from backend.knobs.serialize import field_from_json
from backend.reporting import front
from backend.reporting.charts import front_traces, markers_by_series
from backend.reporting.metrics import REGISTRY, pick
from backend.reporting.provenance import hardware, ran_line, ran_on
from backend.reporting.style import apply_layout, escaped, series_colors
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo import serving as point_store

FIGURES = (
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "e2e_p50_ms",
    "output_tokens_per_s",
    "decode_tokens_per_s",
    "weights_mb",
    "kv_cache_mb",
    "memory_mb",
    "bandwidth_fraction",
    "perplexity",
    "greedy_agreement",
)
COLUMNS = (
    "job_id",
    "point_id",
    "key",
    "series",
    "label",
    "variant",
    "runtime",
    "precision",
    "prompt_tokens",
    "new_tokens",
    "sequences",
    "status",
    "stable",
    *FIGURES,
    "peak_rss_mb",
    "bandwidth_gb_s",
    "bandwidth_in_cache",  # the bytes a step reads fit in the last-level cache (L3, GPU L2)
    "bandwidth_note",  # what the share of peak is not, beside it ("" for a DRAM figure)
    "bandwidth_step_mb",  # the bytes a decode step reads (weights less lookup tables, + KV)
    "bandwidth_cache",  # the cache those bytes fit in ("32 MB L3"), "" where they did not
    "peak_bandwidth",  # the peak the share is of, and where it came from
    "j_per_token",
    "runtime_versions",
    "hardware",  # the GPU for a GPU point, else the CPU and its cores (reporting.provenance)
    "ran_on",  # the host
    "ran",  # what ran the point, as the CLI says it (reporting.provenance.ran_line)
    "split",  # where its tokens left the reference, with the margins there ("" where none did)
    "model_id",  # the library model that ran: the upload, or its weight-only copy
    "job_model_id",  # the model the job was asked for: its variants' one Pareto front
    "model",  # that model's name
    "facts",  # every fact the runtime stored with the point, as JSON
    "price_per_hour",
    "cost_per_million_tokens",  # price per hour / (output tokens/s x 3600) x 1e6, ok points
    "verdict",
    "error",
)
TTFT, ITL, TOKENS, MEMORY, PPL = pick(
    "ttft_p50_ms", "itl_p50_ms", "output_tokens_per_s", "memory_mb", "perplexity"
)


def _row(
    job_id: int, model: tuple[int | None, str], point_id: int, key: str, payload: dict[str, Any]
) -> dict[str, Any]:
    payload = without_figures(payload)  # a point that did not run: none, not a stored 0.0
    variant = payload.get("variant_label") or payload.get("variant", "")
    series = f"#{job_id} {model[1]} · {variant} · {payload.get('runtime', '')}"
    prompt, new, seqs = (payload.get(k) for k in ("prompt_tokens", "new_tokens", "sequences"))
    agreement = payload.get("agreement") or []
    ok = payload.get("status") in ("ok", "wrong outputs")
    weights, kv = payload.get("weights_mb"), payload.get("kv_cache_mb")
    row = {
        "job_id": job_id,
        "job_model_id": model[0],
        "model": model[1],
        "point_id": point_id,
        "key": key,
        "series": series,
        "label": f"{series} · prompt {prompt}, {new} new, {seqs} seq",
        "variant": payload.get("variant"),
        "runtime": payload.get("runtime"),
        "precision": payload.get("precision", ""),
        "prompt_tokens": prompt,
        "new_tokens": new,
        "sequences": seqs,
        "status": payload.get("status"),
        "stable": payload.get("stable"),
        "verdict": payload.get("verdict", ""),
        "error": payload.get("error", ""),
    }
    for key in FIGURES[:9]:
        row[key] = payload.get(key) if ok else None
    row["memory_mb"] = weights + kv if ok and weights is not None and kv is not None else None
    row |= bandwidth_columns(payload.get("roofline") or {}, ok)
    row["peak_rss_mb"] = payload.get("peak_rss_mb") if ok else None
    row["peak_bandwidth"] = (payload.get("peak_bandwidth") or {}).get("source", "")
    row["j_per_token"] = (payload.get("energy") or {}).get("j_p50") if ok else None
    facts = payload.get("facts") or {}
    row["runtime_versions"] = ", ".join(f"{k} {v}" for k, v in facts.get("versions", {}).items())
    environment = payload.get("environment") or {}  # none on points stored before it was kept
    row["hardware"] = hardware(environment, environment.get("device", "cpu"))
    row["ran_on"] = ran_on(environment)
    ran = facts or environment  # a point that failed before its runtime opened says nothing
    row["ran"] = ran_line(payload.get("runtime") or "", facts, environment) if ran else ""
    row["model_id"] = payload.get("model_id")
    row["facts"] = json.dumps(facts, sort_keys=True)
    row["perplexity"] = (payload.get("perplexity") or {}).get("perplexity")
    row["greedy_agreement"] = min(agreement) / new if agreement and new else None
    margins = payload.get("split_margins", [])  # where it left the reference, as the CLI says
    row["split"] = split_note(row["label"], agreement, new or 0, margins)
    return row


def bandwidth_columns(roof: dict[str, Any], ok: bool) -> dict[str, Any]:
    """The roofline's columns; a step whose bytes sat in cache has no share of the DRAM (HBM)
    peak (dramshare.dram_share): left empty, and bandwidth_in_cache, _cache and _note say why."""
    achieved, step = roof.get("achieved_bytes_s"), roof.get("bytes_per_step")
    return {
        "bandwidth_fraction": dram_share(roof) if ok else None,
        "bandwidth_gb_s": achieved / 1e9 if ok and achieved is not None else None,
        "bandwidth_in_cache": roof.get("in_cache") if ok else None,
        "bandwidth_note": roof.get("note", "") if ok else "",
        "bandwidth_step_mb": step / 2**20 if ok and step is not None else None,
        "bandwidth_cache": held_in(roof) if ok else "",
    }


def generation_frame(job_ids: list[int], prices: pricing.Prices = ()) -> pd.DataFrame:
    """One row per stored point of the jobs, in the order they landed; priced per million
    output tokens by `prices` (else OPTIBOARD_PRICE_PER_HOUR) for the job's device."""
    names = {m.id: m.name for m in model_store.list_models()}
    table = pricing.or_default(prices)
    models, price = {}, {}
    for job_id in job_ids:
        job = job_store.get_job(job_id)
        models[job_id] = (
            (job.model_id, names.get(job.model_id, f"model {job.model_id}")) if job else (None, "?")
        )
        device = field_from_json(GenerationJobSpec, job.spec, "device") if job else ""
        price[job_id] = pricing.price_for(table, device)
    rows = []
    for p in point_store.list_points(job_ids, kind=point_store.GENERATION):
        row = _row(p.job_id, models[p.job_id], p.id, p.point_key, p.payload)
        found = price[p.job_id]
        row["price_per_hour"] = found.per_hour if found else None
        per_hour = found.per_hour if found and row["status"] == "ok" else None
        row["cost_per_million_tokens"] = pricing.cost_per_million(
            per_hour, row["output_tokens_per_s"]
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def in_cache_notes(measured: pd.DataFrame) -> list[str]:
    """Why a share of peak bandwidth is left empty: dramshare's one sentence per cache, naming
    the points by their labels (the page said it once per point, four near-identical lower-case
    lines; `optiboard show` says the same sentence, naming them by key)."""
    cached = measured[measured["bandwidth_cache"] != ""]
    named = zip(
        cached["label"], cached["bandwidth_cache"], cached["bandwidth_step_mb"], strict=True
    )
    return dramshare.in_cache_notes(named, len(measured))


def _measured(frame: pd.DataFrame) -> pd.DataFrame:
    """Measured points, their names (from uploads) escaped for Plotly's text markup."""
    return escaped(frame[frame["status"].isin(MEASURED)])


def _scored(frame: pd.DataFrame) -> pd.DataFrame:
    """Measured points with a perplexity and a speed (what the perplexity chart draws), as
    stored."""
    data = frame[frame["status"].isin(MEASURED)]
    return data[data["perplexity"].notna() & data["output_tokens_per_s"].notna()]


def _lines(frame: pd.DataFrame, y: str, title: str) -> go.Figure:
    """One line per series and (prompt, new tokens), against concurrent sequences."""
    data = _measured(frame)
    fig = go.Figure()
    colors = series_colors(list(dict.fromkeys(data["series"])))
    metric = REGISTRY[y]
    for (name, prompt, new), group in data.groupby(
        ["series", "prompt_tokens", "new_tokens"], sort=False
    ):
        group = group.sort_values("sequences")
        fig.add_trace(
            go.Scatter(
                x=group["sequences"],
                y=group[y],
                mode="lines+markers",
                name=f"{name} · prompt {prompt}, {new} new",
                marker={"color": colors[name], "size": 9},
                line={"color": colors[name]},
                text=group["label"],
                hovertemplate=f"%{{text}}<br>{metric.header} {metric.hover('y')}<extra></extra>",
            )
        )
    return apply_layout(fig, title, "concurrent sequences", metric.axis_title, log_x=True)


def ttft_vs_sequences(frame: pd.DataFrame) -> go.Figure:
    return _lines(frame, "ttft_p50_ms", "Time to first token against concurrency")


def itl_vs_sequences(frame: pd.DataFrame) -> go.Figure:
    return _lines(frame, "itl_p50_ms", "Inter-token latency against concurrency")


def tokens_vs_memory(frame: pd.DataFrame) -> go.Figure:
    """Output tokens/s against weights + KV cache: up and left is better."""
    fig = go.Figure()
    hover = f"%{{text}}<br>{MEMORY.hover('x')}<br>{TOKENS.hover('y')}"
    markers_by_series(fig, _measured(frame), "memory_mb", "output_tokens_per_s", hover)
    return apply_layout(fig, "Tokens/s against memory", MEMORY.axis_title, TOKENS.axis_title)


PPL_FRONT = ("output_tokens_per_s", "perplexity")


def with_fronts(frame: pd.DataFrame, markup: bool = True) -> pd.DataFrame:
    """The measured points with a perplexity and a speed, with `pareto` (each model's own
    perplexity/speed front of stable FP32-like points; front.each_front) and `beyond_pareto`
    (unstable points that measured beyond it). Two models' points are no alternatives to each
    other, so one model's never pushes another's off its front. A front is the job's model's,
    its weight-only variants on it: model_id here is job_model_id, which each_front divides by.
    markup: series and labels escaped for Plotly's text (a chart's), else as stored (captions)."""
    data = escaped(_scored(frame)) if markup else _scored(frame)
    data = data.assign(model_id=data.get("job_model_id"))  # absent: one front
    on, beyond = front.each_front(data, PPL_FRONT)
    return data.assign(pareto=on, beyond_pareto=beyond)


def perplexity_vs_speed(frame: pd.DataFrame) -> go.Figure:
    """Perplexity against output tokens/s; each model's Pareto front of the points with
    FP32-like outputs and a stable measurement is joined and starred (with_fronts), named by the
    model where the view holds several; an unstable point beyond it is drawn hollow and its
    hover says so."""
    data = with_fronts(frame)
    fig = go.Figure()
    hover = f"%{{text}}<br>{TOKENS.hover('x')}<br>perplexity {PPL.hover('y')}"
    markers_by_series(fig, data, *PPL_FRONT, hover, beyond="beyond_pareto")
    # wrong outputs are drawn, never a best trade-off
    front_traces(fig, data, "pareto", PPL_FRONT)
    fig.update_traces(cliponaxis=False)  # a star at the range's edge was cut in half
    return apply_layout(fig, "Perplexity against speed", TOKENS.axis_title, PPL.axis_title)


def chart_captions(frame: pd.DataFrame) -> dict[str, str]:
    """The sentence under the perplexity chart (by CHARTS key), as the sweep view says its own
    (htmlreport.chart_captions): what the starred fronts span where the view holds several
    models, and each unstable point that measured beyond its model's front, with its figures."""
    fronts = {"perplexity": (PPL_FRONT, "beyond_pareto")}
    return front.captions(with_fronts(frame, markup=False), fronts)


def nothing_to_draw(key: str, frame: pd.DataFrame) -> str:
    """Why a chart of CHARTS would be empty axes, in one sentence ('' where it has points): a
    job given no text has no perplexity, and an empty chart with axes from -1 to 4 said nothing."""
    if key != "perplexity" or not _scored(frame).empty:  # the points, not their fronts
        return ""
    return (
        "Perplexity against speed: no measured point has a perplexity, as no perplexity text was "
        "given; run the job again with one (Optimize's \"Perplexity text\", or the CLI's "
        "--perplexity-text) to score each variant."
    )


CHARTS = {
    "ttft": ("TTFT vs sequences", ttft_vs_sequences),
    "itl": ("ITL vs sequences", itl_vs_sequences),
    "memory": ("Tokens/s vs memory", tokens_vs_memory),
    "perplexity": ("Perplexity vs speed", perplexity_vs_speed),
}
